"""A browser viewer: a trajectory as one self-contained HTML file that plays it in 3-D (meshcat's three.js
viewer, inlined; orbit with the mouse, play/pause and scrub in its Animations panel), with the constraint
forces drawn as red arrows at the contact points.

No server runs: the scene is lowered to meshcat's drawing commands (:mod:`.meshcat_commands`, JSON) and embedded
next to the viewer's JavaScript (meshcat 0.3.2's, shipped in ``assets/``), as meshcat's own ``static_html`` does;
the meshcat package is not needed. :func:`screenshot` renders such a file in a
headless Chromium (``apt-get install chromium``; software WebGL); a page held at a frame
(``viewer.html#frame=K``) also says what it drew there, for checks in the browser (:func:`render_viewer`).
"""
import shutil
import subprocess
from pathlib import Path

import numpy as np

from . import meshcat_commands as mc

SCRIPT = "meshcat.min.js"        # meshcat 0.3.2's viewer/dist/main.min.js, unchanged (MIT; its licences beside it)


class ViewerError(RuntimeError):
    """The viewer cannot be built or rendered (missing file or browser); the message says what to install."""


def viewer_script():
    """The text of meshcat's three.js viewer (``mrds_jax/viz/assets/meshcat.min.js``), which the page inlines."""
    from importlib import resources
    try:
        return resources.files("mrds_jax.viz").joinpath("assets", SCRIPT).read_text(encoding="utf-8")
    except OSError:
        raise ViewerError(f"the viewer script mrds_jax/viz/assets/{SCRIPT} is missing from this installation of "
                          "mrds_jax: reinstall it (pip install --force-reinstall .)") from None


def _align_y(d):
    """Quaternion (x, y, z, w) turning e_y onto the unit vector d (three.js cylinders lie along y)."""
    y = np.array([0.0, 1.0, 0.0])
    c = float(np.dot(y, d))
    if c < -1 + 1e-12:
        return [1.0, 0.0, 0.0, 0.0]
    axis = np.cross(y, d)
    w = 1.0 + c
    q = np.array([axis[0], axis[1], axis[2], w])
    return list(q / np.linalg.norm(q))


def _stick_keys(a, b):
    """(position, quaternion, scale) of a unit cylinder spanning a → b."""
    d = b - a
    n = float(np.linalg.norm(d))
    u = d / n if n > 1e-12 else np.array([0.0, 1.0, 0.0])
    return list((a + b) / 2), _align_y(u), [1.0, max(n, 1e-6), 1.0]


def _geom_shape(kind, size, plane_side=1.0):
    """The meshcat geometry of a collision geom (three.js cylinders run along their local y); a plane as a square
    slab ``plane_side`` wide, its top face the plane (:func:`_plane_keys`)."""
    if kind == "plane":
        return mc.box([plane_side, plane_side, PLANE_THICKNESS * plane_side])
    if kind == "sphere":
        return mc.sphere(size[0])
    if kind == "box":
        return mc.box([2 * float(x) for x in size])
    if kind in ("capsule", "cylinder"):
        return mc.cylinder(2 * float(size[1]) + (2 * float(size[0]) if kind == "capsule" else 0.0), size[0])
    return None


def _pose_keys(T, kind):
    """(position, quaternion [x, y, z, w], scale) of a geom at the world pose T (4x4); a cylinder or capsule is
    turned so that three.js's y axis lies along the geom's z."""
    R = np.asarray(T[:3, :3])
    if kind in ("capsule", "cylinder"):
        R = R @ np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])     # local y → geom z
    w = np.sqrt(max(1.0 + R[0, 0] + R[1, 1] + R[2, 2], 1e-12)) / 2
    q = [(R[2, 1] - R[1, 2]) / (4 * w), (R[0, 2] - R[2, 0]) / (4 * w), (R[1, 0] - R[0, 1]) / (4 * w), w]
    if 1.0 + R[0, 0] + R[1, 1] + R[2, 2] < 1e-6:                                     # a half turn: about the largest axis
        i = int(np.argmax(np.diagonal(R)))
        v = np.sqrt(np.maximum(0.0, (np.diagonal(R) + 1.0) / 2.0))
        v[np.arange(3) != i] *= np.sign(R[i, np.arange(3) != i] + R[np.arange(3) != i, i])
        q = [*v, 0.0]
    return list(np.asarray(T[:3, 3], float)), [float(x) for x in q], [1.0, 1.0, 1.0]


PLANE_THICKNESS = 5e-4      # a plane's slab, as a fraction of its side
PLANE_SIDE = 4.0            # a plane's square, in half sizes of the motion (Scene.extent)
FORCE_LENGTH = 0.5          # the typical contact force's arrow, in half sizes of the motion


def _plane_keys(T, centre, side):
    """(position, quaternion, scale) of a plane's slab: the plane of the pose T (normal its z axis), centred at the
    motion's centre projected onto it, its top face in the plane."""
    n, p = np.asarray(T[:3, 2]), np.asarray(T[:3, 3])
    foot = centre - np.dot(centre - p, n) * n - 0.5 * PLANE_THICKNESS * side * n
    pose = np.array(T, float)
    pose[:3, 3] = foot
    return _pose_keys(pose, "plane")


def force_scale(scene):
    """Metres of arrow per newton: the 95th percentile of the contact forces that touch is drawn
    :data:`FORCE_LENGTH` half sizes long (0 when nothing carries force), so an impact's spike does not shrink
    the steady forces to dots."""
    f = np.linalg.norm(scene.forces, axis=-1)[scene.in_contact()]
    f = f[f > 0]
    return FORCE_LENGTH * scene.extent()[1] / float(np.percentile(f, 95)) if f.size else 0.0


def force_legend(scale):
    """The arrows' scale in words, for the page's label: a round force and its arrow length."""
    if scale <= 0:
        return ""
    per_decimetre = 0.1 / scale
    rounded = float(f"{per_decimetre:.1g}")
    return f"force arrows (red): {100 * rounded * scale:.3g} cm = {rounded:g} N"


def camera_target(scene):
    """The point the camera orbits, the middle of the motion (:meth:`Scene.extent`), in three.js's y-up world:
    meshcat's scene turns the model's z-up world by -90° about x, so (x, y, z) is seen as (x, z, -y)."""
    c, _ = scene.extent()
    return [float(c[0]), float(c[2]), float(-c[1])]


def camera_commands(scene):
    """The camera looking down at the middle of the mechanism from above and aside (meshcat's grid hidden; a floor
    is drawn only where the model has a plane, by :func:`scene_commands`). meshcat's camera hangs under
    ``/Cameras/default/rotated``, whose turn undoes the scene's: its position is in three.js's y-up world, as is
    the orbit's target, which the page sets (:func:`camera_target`; meshcat has no command for it)."""
    _, r = scene.extent()
    eye = np.asarray(camera_target(scene)) + np.array([1.8, 1.5, 1.8]) * r        # y is up in this frame
    return [mc.set_property("/Grid", "visible", False),
            mc.set_property("/Cameras/default/rotated/<object>", "position", [float(x) for x in eye])]


def scene_commands(scene, fps=20, scale=None, radius=0.015):
    """meshcat drawing commands (dicts, already lowered) for a :class:`~mrds_jax.viz.scene.Scene`: one
    cylinder per stick, a sphere per contact point and an arrow (cylinder) per constraint force, both shown only
    while the point touches, every collision geom at its pose (planes as square slabs), and one animation of them
    all. ``scale``: metres per newton (default :func:`force_scale`)."""
    colors = [0x1f77b4, 0xff7f0e, 0x2ca02c, 0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f, 0xbcbd22, 0x17becf]
    cmds, tracks = [], {}
    n_t = scene.segments.shape[0]
    scale = force_scale(scene) if scale is None else scale
    touching = scene.in_contact()
    centre, r = scene.extent()
    hidden = [1e-9, 1e-9, 1e-9]               # a point that does not touch is drawn at no size

    def add(name, geometry, color, keys_at):
        path = f"/mrds_jax/{name}"
        cmds.append(mc.set_object(path, geometry, color))
        pos, quat, scl = zip(*(keys_at(i) for i in range(n_t)))
        tracks[path] = [mc.track("position", "vector3", pos), mc.track("quaternion", "quaternion", quat),
                        mc.track("scale", "vector3", scl)]

    for s in range(scene.segments.shape[1]):
        add(f"stick{s}", mc.cylinder(1.0, radius), colors[scene.segment_module[s] % len(colors)],
            lambda i, s=s: _stick_keys(scene.segments[i, s, 0], scene.segments[i, s, 1]))
    def shown(keys, i, c):
        return keys if touching[i, c] else (keys[0], keys[1], hidden)

    for c in range(scene.points.shape[1]):
        add(f"contact{c}", mc.sphere(2 * radius), 0x222222,
            lambda i, c=c: shown((list(scene.points[i, c]), [0.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0]), i, c))
        if scale > 0:
            add(f"force{c}", mc.cylinder(1.0, radius * 0.8), 0xd62728, lambda i, c=c: shown(
                _stick_keys(scene.points[i, c], scene.points[i, c] + scale * scene.forces[i, c]), i, c))
    side = PLANE_SIDE * r
    for name, kind, size, poses in scene.geoms:
        shape = _geom_shape(kind, size, side)
        if shape is None:
            continue
        color = 0xd8d8d0 if kind == "plane" else 0x9aa5b1
        add(f"geom_{name}", shape, color, lambda i, poses=poses, kind=kind: (
            _plane_keys(poses[i], centre, side) if kind == "plane" else _pose_keys(poses[i], kind)))
    cmds.append(mc.set_animation(tracks, fps, repetitions=1000))   # loops
    return cmds + camera_commands(scene)


# What the page drew at the frame on show, as three.js has it after the animation moved the objects, written into
# the page's hidden <pre id="mrds-drawn"> (JSON) for checks in a headless browser (read with drawn_summary):
# "frame"; "geoms": per geom its "pose", the 4x4 world transform in the model's world (z up; three.js's column-major
# order), and "box", its shape's bounds in its own frame (min xyz, max xyz);
# "contacts" and "forces": the indices of the contact points and force arrows drawn at full size; "others": any
# object drawn outside /mrds_jax besides the viewer's own lights and camera; "grid": whether meshcat's grid shows;
# "camera": its "view" (the model's world in the camera's frame, 4x4 column-major), vertical "fov" (degrees) and
# "zoom" (three.js keeps the vertical field of view whatever the window's shape: see pixel_coordinates).
DRAWN_SUMMARY_JS = """
function mrdsDrawn(k) {
  var scene = viewer.scene, camera = viewer.camera, root = viewer.scene_tree.find(["mrds_jax"]);
  scene.updateMatrixWorld(true);
  var toModel = scene.matrixWorld.clone().invert(), out = {frame: k, geoms: {}, contacts: [], forces: []};
  function drawn(o) { return o.visible && Math.min(o.scale.x, o.scale.y, o.scale.z) > 1e-6; }
  Object.keys(root.children).forEach(function (name) {
    var o = root.children[name].object, m = /^(contact|force)(\\d+)$/.exec(name);
    if (name.indexOf("geom_") === 0) {
      var mesh = null;
      o.traverse(function (c) { if (c.isMesh && !mesh) mesh = c; });     // meshcat may wrap it in a group
      mesh.geometry.computeBoundingBox();
      var b = mesh.geometry.boundingBox;
      out.geoms[name.slice(5)] = {pose: toModel.clone().multiply(mesh.matrixWorld).toArray(),
                                  box: [b.min.x, b.min.y, b.min.z, b.max.x, b.max.y, b.max.z]};
    }
    else if (m && drawn(o)) out[m[1] === "contact" ? "contacts" : "forces"].push(+m[2]);
  });
  out.others = [];
  scene.traverse(function (o) {
    var path = [], shown = true;
    for (var p = o; p && p !== scene; p = p.parent) { path.unshift(p.name); shown = shown && p.visible; }
    if (o.isMesh && shown && ["mrds_jax", "Lights", "Cameras"].indexOf(path[0]) < 0) out.others.push(path.join("/"));
  });
  out.grid = viewer.scene_tree.find(["Grid"]).object.visible;
  camera.updateMatrixWorld(true);
  out.camera = {view: camera.matrixWorld.clone().invert().multiply(scene.matrixWorld).toArray(), fov: camera.fov,
                zoom: camera.zoom};
  return out;
}
"""


def viewer_html(scene, path=None, fps=20, title="mrds_jax"):
    """A self-contained HTML page that plays ``scene`` (see the module docstring); written to ``path`` if
    given. Returns the HTML text."""
    summary = DRAWN_SUMMARY_JS
    js = viewer_script()
    import json
    commands = json.dumps(scene_commands(scene, fps)).replace("</", "<\\/")      # no "</script>" inside the script
    import html as html_text
    target = ", ".join(f"{x:.6g}" for x in camera_target(scene))
    times = json.dumps([round(float(t), 6) for t in scene.t])
    legend = force_legend(force_scale(scene))
    html = f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{html_text.escape(title)}</title>
<style>body {{ margin: 0; }} #meshcat-pane {{ width: 100vw; height: 100vh; overflow: hidden; }}
#mrds-label {{ position: absolute; top: 10px; left: 12px; font: 16px sans-serif; color: #222;
  background: rgba(255, 255, 255, 0.8); padding: 4px 8px; border-radius: 4px; pointer-events: none;
  max-width: calc(100vw - 300px); }}</style></head>
<body><div id="meshcat-pane"></div>
<div id="mrds-label"><b>{html_text.escape(title)}</b><br><span id="mrds-time">t = {float(scene.t[0]):.3f} s</span>
<br><span id="mrds-force-scale">{html_text.escape(legend)}</span></div>
<pre id="mrds-drawn" hidden></pre>
<script>{js}</script>
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
// the drawing commands, in order (meshcat's, as JSON)
{commands}.forEach(function (cmd) {{ viewer.handle_command(cmd); }});
viewer.controls.target.set({target});          // the orbit's centre: the middle of the motion
viewer.controls.update();
// the animation runs at {fps} frames per second of the page; mrdsTimes: the simulated time of each frame
var mrdsFps = {fps}, mrdsTimes = {times};
function mrdsFrameOnShow() {{
  var time = viewer.animator.actions.reduce(function (m, a) {{ return Math.max(m, a.time); }}, 0);
  return Math.min(Math.max(Math.round(time * mrdsFps), 0), mrdsTimes.length - 1);
}}
// a page opened as viewer.html#frame=K holds frame K (paused; the Animations panel plays on)
var mrdsHeld = /^#frame=(\\d+)$/.exec(window.location.hash);
if (mrdsHeld) {{
  viewer.animator.pause();
  viewer.animator.seek(Math.min(+mrdsHeld[1], mrdsTimes.length - 1) / mrdsFps);
}}
{summary}
// the summary of what was drawn is a scene traversal: redone on a held page and when the frame on show changes,
// not at every repaint of a playing one
var mrdsSummarised = -1;
function mrdsShowTime() {{
  var k = mrdsFrameOnShow();
  document.getElementById("mrds-time").textContent = "t = " + mrdsTimes[k].toFixed(3) + " s";
  if (mrdsHeld || k !== mrdsSummarised) {{
    document.getElementById("mrds-drawn").textContent = JSON.stringify(mrdsDrawn(k));
    mrdsSummarised = k;
  }}
  requestAnimationFrame(mrdsShowTime);
}}
requestAnimationFrame(mrdsShowTime);
</script></body></html>
"""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(html)
    return html


BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome", "chrome")


def find_browser():
    """Path of a Chromium-family browser on the PATH, or None."""
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


# a fresh profile and no background traffic: the browser talks to nothing but the page it renders
HEADLESS_FLAGS = ("--headless", "--no-sandbox", "--no-first-run", "--disable-quic", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars")
WEBGL_FLAGS = ("--use-angle=swiftshader", "--enable-unsafe-swiftshader")     # software WebGL for the viewer
NO_GPU_FLAGS = ("--disable-gpu",)


def run_browser(args, browser=None, webgl=True, timeout=120):
    """Run a headless Chromium with ``args`` (after :data:`HEADLESS_FLAGS` and a fresh temporary profile):
    the CompletedProcess."""
    import tempfile
    browser = browser or find_browser()
    if browser is None:
        raise ViewerError("no headless browser found: apt-get install chromium-headless-shell (or chromium)")
    with tempfile.TemporaryDirectory(prefix="mrds_jax_chromium_") as profile:
        cmd = [browser, *HEADLESS_FLAGS, *(WEBGL_FLAGS if webgl else NO_GPU_FLAGS), f"--user-data-dir={profile}",
               *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def page_uri(page, frame=None):
    """The ``file://`` address of a page (a path, or an address given as such), held at viewer frame ``frame``
    (``#frame=K``: :func:`viewer_html`'s page pauses there) when given."""
    uri = page if isinstance(page, str) and "://" in page else Path(page).resolve().as_uri()
    return uri if frame is None else f"{uri.split('#')[0]}#frame={int(frame)}"


def screenshot(html_path, png_path, size=(900, 700), wait_ms=6000, browser=None, webgl=True):
    """Render ``html_path`` (a path or a :func:`page_uri`) in a headless Chromium (software WebGL; ``webgl=False``
    for plain pages) and save a PNG; returns its path."""
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    run = run_browser([f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={wait_ms}",
                       f"--screenshot={png_path}", page_uri(html_path)], browser, webgl)
    if run.returncode != 0 or not png_path.exists():
        raise ViewerError(f"the browser failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return png_path


def rendered_dom(html_path, wait_ms=8000, browser=None):
    """The DOM of ``html_path`` (a path or a :func:`page_uri`) after its scripts ran for ``wait_ms`` of virtual
    time (e.g. MathJax), as HTML."""
    run = run_browser([f"--virtual-time-budget={wait_ms}", "--dump-dom", page_uri(html_path)], browser, webgl=False)
    if run.returncode != 0 or "<html" not in run.stdout:
        raise ViewerError(f"the browser failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return run.stdout


def drawn_summary(dom):
    """What a viewer page drew (see :data:`DRAWN_SUMMARY_JS`), read from its DOM after its scripts ran (as
    ``--dump-dom`` writes it: :func:`render_viewer`): a dict, its 4x4 matrices as numpy arrays (row-major)."""
    import html as html_text
    import json
    import re
    found = re.search(r'<pre id="mrds-drawn" hidden="">(.*?)</pre>', dom, re.S)
    if not found or not found.group(1).strip():
        raise ViewerError("the page wrote no summary of what it drew (did its scripts run with WebGL?)")
    out = json.loads(html_text.unescape(found.group(1)))
    as_matrix = lambda m: np.asarray(m, float).reshape(4, 4).T          # three.js stores columns
    out["geoms"] = {name: dict(pose=as_matrix(g["pose"]), box=np.reshape(g["box"], (2, 3)))
                    for name, g in out["geoms"].items()}
    out["camera"]["view"] = as_matrix(out["camera"]["view"])
    return out


def pixel_coordinates(camera, points, size):
    """(n, 2) pixel coordinates (column, row from the top left) of world points (n, 3) seen by a viewer page's
    ``camera`` (:func:`drawn_summary`) in a window ``size`` (width, height): three.js's perspective projection, the
    vertical field of view fixed and the horizontal one following the window's aspect ratio."""
    p = np.asarray(points, float) @ camera["view"][:3, :3].T + camera["view"][:3, 3]
    f = camera["zoom"] / np.tan(np.deg2rad(camera["fov"]) / 2)
    x, y = f * (size[1] / size[0]) * p[:, 0] / -p[:, 2], f * p[:, 1] / -p[:, 2]
    return np.stack([(x + 1) / 2 * size[0], (1 - y) / 2 * size[1]], axis=1)


def render_viewer(html_path, png_path, frame=None, size=(800, 600), wait_ms=3000, browser=None):
    """One headless Chromium run of a viewer page held at ``frame`` (:func:`page_uri`): its screenshot (saved at
    ``png_path``) and what it drew (:func:`drawn_summary`). Returns (png path, summary)."""
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    run = run_browser([f"--window-size={size[0]},{size[1]}", f"--virtual-time-budget={wait_ms}",
                       f"--screenshot={png_path}", "--dump-dom", page_uri(html_path, frame)], browser)
    if run.returncode != 0 or not png_path.exists() or "<html" not in run.stdout:
        raise ViewerError(f"the browser failed (exit {run.returncode}): {run.stderr[-2000:]}")
    return png_path, drawn_summary(run.stdout)
