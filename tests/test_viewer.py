"""See it move: the stick-figure scene of a trajectory, the browser viewer built from it, and (marked
``browser``) a screenshot of the viewer in a real headless Chromium.

The scene's sticks end at the link origins MuJoCo computes for the same MJCF state (``xpos``: an engine
nobody here wrote), its contact forces are the world-axes ``F_EP`` of our forward dynamics, and the viewer's
drawing commands place a unit cylinder exactly on each stick (quaternion turning e_y onto it, scaled to its
length).
"""
import json
import re
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.integrate import Trajectory
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.sysfile import EXAMPLES
from mrds_jax.viz import meshcat_commands as mc
from mrds_jax.viz import scene as make_scene
from mrds_jax.viz.viewer import find_browser, scene_commands, screenshot, viewer_html, viewer_script
from mujoco_states import consistent_states

N = 4


@pytest.fixture(scope="module")
def fourbar_scene():
    path = EXAMPLES / "fourbar.xml"
    system, mapping = load_mjcf(path, return_mapping=True)
    model = mujoco.MjModel.from_xml_path(str(path))
    states = consistent_states(model, mapping, np.random.default_rng(4), N)
    traj = Trajectory(t=jnp.arange(N) * 0.1, q=tuple(jnp.stack([s.q[k] for s in states]) for k in range(2)),
                      v=tuple(jnp.stack([s.v[k] for s in states]) for k in range(2)), first_nonfinite=-1)
    return system, mapping, model, states, make_scene(system, traj, forces=True)


def test_scene_sticks_end_at_mujoco_body_origins(fourbar_scene):
    system, mapping, model, states, sc = fourbar_scene
    data = mujoco.MjData(model)
    n_links = [m.topology.n_links for m in system.modules]
    for i, state in enumerate(states):
        data.qpos[:] = mapping.to_mujoco(state)[0]
        mujoco.mj_kinematics(model, data)
        s = 0
        for m, module in enumerate(system.modules):
            for link, name in enumerate(module.topology.link_names):
                body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)
                np.testing.assert_allclose(sc.segments[i, s + link, 1], data.xpos[body], atol=1e-12)
            s += n_links[m] + len(module.topology.frame_links)
        # the contact point (P) and the constraint force by E on P, world axes, from our forward dynamics
        out = S.forward_dynamics(system, state)
        c = system.contacts[0]
        module = system.modules[system.module_index(c.E[0])]
        f = module.topology.frame_index(c.E[1])
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, module.topology.link_names[module.topology.frame_links[f]])
        R_E = np.asarray(data.xmat[body]).reshape(3, 3)               # E's link frame = its MuJoCo body frame
        R_frame = np.asarray(module.params.frame_R[f])
        np.testing.assert_allclose(sc.forces[i, 0], R_E @ R_frame @ np.asarray(out.F_EP[0][3:]), atol=1e-9)
    assert np.abs(sc.forces).max() > 1.0


def test_viewer_commands_place_each_stick(fourbar_scene):
    *_, sc = fourbar_scene
    cmds = scene_commands(sc)
    objects = [c for c in cmds if c["type"] == "set_object" and c["path"].startswith("/mrds_jax/")]
    n_sticks, n_contacts = sc.segments.shape[1], sc.points.shape[1]
    assert len(objects) == n_sticks + 2 * n_contacts               # sticks, contact spheres, force arrows
    assert not [c for c in cmds if "floor" in c.get("path", "")]   # the four-bar has no floor: none is drawn
    (anim,) = [c for c in cmds if c["type"] == "set_animation"]
    clips = {a["path"]: a["clip"] for a in anim["animations"]}
    for s in range(n_sticks):
        tracks = {t["name"]: t["keys"] for t in clips[f"/mrds_jax/stick{s}"]["tracks"]}
        for i in range(N):
            a, b = sc.segments[i, s]
            if np.linalg.norm(b - a) < 1e-9:         # a root link at its joint's origin: nothing to draw
                continue
            x, y, z, w = tracks[".quaternion"][i]["value"]
            R = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                          [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                          [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])
            length = tracks[".scale"][i]["value"][1]
            centre = np.asarray(tracks[".position"][i]["value"])
            np.testing.assert_allclose(centre + R @ [0, length / 2, 0], b, atol=1e-9)
            np.testing.assert_allclose(centre - R @ [0, length / 2, 0], a, atol=1e-9)


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def without_uuids(cmd):
    """A command as JSON with every uuid (random per object) replaced by its order of first appearance."""
    text, seen = json.dumps(cmd, sort_keys=True), {}
    return UUID.sub(lambda m: f"uuid{seen.setdefault(m.group(0), len(seen))}", text)


def test_drawing_commands_equal_meshcats_own_lowering():
    """The viewer writes meshcat's commands itself (no meshcat package at run time): each kind it sends equals
    what meshcat 0.3.2's classes lower to, uuids aside (the test extra installs meshcat for this)."""
    pytest.importorskip("meshcat")
    import meshcat.geometry as g
    from meshcat.animation import Animation, AnimationClip
    from meshcat.commands import SetAnimation, SetObject, SetProperty
    from meshcat.path import Path as MPath
    shapes = [(mc.box([0.4, 0.3, 0.1]), g.Box([0.4, 0.3, 0.1])), (mc.sphere(0.06), g.Sphere(0.06)),
              (mc.cylinder(1.0, 0.015), g.Cylinder(1.0, 0.015))]
    for ours, theirs in shapes:
        lowered = SetObject(theirs, g.MeshLambertMaterial(color=0x1f77b4), MPath(("mrds_jax", "stick0"))).lower()
        assert without_uuids(mc.set_object("/mrds_jax/stick0", ours, 0x1f77b4)) == without_uuids(lowered)
    assert mc.set_property("/Cameras/default/rotated/<object>", "position", [1.0, 2.0, 3.0]) == SetProperty(
        "position", [1.0, 2.0, 3.0], MPath(("Cameras", "default", "rotated", "<object>"))).lower()
    rng = np.random.default_rng(0)
    pos, quat, scl = rng.normal(size=(3, 3)), rng.normal(size=(3, 4)), rng.normal(size=(3, 3))
    anim = Animation(default_framerate=20)
    clip = AnimationClip(fps=20)
    for i in range(3):
        clip.set_property(i, "position", "vector3", list(pos[i]))
        clip.set_property(i, "quaternion", "quaternion", list(quat[i]))
        clip.set_property(i, "scale", "vector3", list(scl[i]))
    anim.clips[MPath(("mrds_jax", "stick0"))] = clip
    ours = mc.set_animation({"/mrds_jax/stick0": [mc.track("position", "vector3", pos),
                                                  mc.track("quaternion", "quaternion", quat),
                                                  mc.track("scale", "vector3", scl)]}, 20, repetitions=1000)
    assert ours == SetAnimation(anim, play=True, repetitions=1000).lower()


def test_shipped_viewer_script_is_meshcats():
    """mrds_jax/viz/assets/meshcat.min.js is meshcat 0.3.2's viewer script byte for byte (the test extra pins that
    release), its licences beside it."""
    meshcat = pytest.importorskip("meshcat")
    from importlib.metadata import version
    assert version("meshcat") == "0.3.2"
    wheel = Path(meshcat.__file__).parent / "viewer" / "dist" / "main.min.js"
    assert viewer_script() == wheel.read_text(encoding="utf-8")
    assets = Path(mc.__file__).parent / "assets"
    assert "Robin Deits" in (assets / "meshcat_LICENSE.txt").read_text()
    assert "three" in (assets / "meshcat.min.js.THIRD_PARTY_LICENSES.json").read_text()


PAGE_WITHOUT_MESHCAT = """
import sys
for name in ("meshcat", "umsgpack", "IPython", "zmq", "tornado", "pyngrok"):
    sys.modules[name] = None                         # as where none of them is installed
import numpy as np
from mrds_jax.viz.scene import Scene
from mrds_jax.viz.viewer import viewer_html
t = np.array([0.0, 0.1])
seg = np.array([[[[0, 0, 0], [0, 0, 1.0]]], [[[0, 0, 0], [0, 1.0, 0]]]])
pose = np.tile(np.eye(4), (2, 1, 1))
sc = Scene(t=t, segments=seg, segment_module=np.array([0]), points=np.zeros((2, 1, 3)),
           forces=np.ones((2, 1, 3)), module_names=("m",), contact_names=("c",),
           geoms=(("floor", "plane", np.zeros(3), pose), ("lid</script>", "box", np.full(3, 0.1), pose)))
html = viewer_html(sc, sys.argv[1], title="no meshcat")
print(sorted(m for m in ("meshcat", "umsgpack") if sys.modules.get(m) is not None))
"""


def test_viewer_page_is_written_without_the_meshcat_package(tmp_path):
    """A plain install has no meshcat: a child interpreter where meshcat and its server stack cannot be imported
    writes the page, its commands readable as JSON (a geom named ``</script>`` does not end the script)."""
    page = tmp_path / "viewer.html"
    run = subprocess.run([sys.executable, "-c", PAGE_WITHOUT_MESHCAT, str(page)], capture_output=True, text=True,
                         timeout=300, check=True)
    assert run.stdout.strip() == "[]"
    html = page.read_text()
    assert viewer_script() in html and html.count("</script>") == 2
    commands = json.loads(re.search(r"^(\[.*\])\.forEach\(function \(cmd\)", html, re.M).group(1))
    paths = [c["path"] for c in commands if c["type"] == "set_object"]
    assert paths == ["/mrds_jax/stick0", "/mrds_jax/contact0", "/mrds_jax/force0", "/mrds_jax/geom_floor",
                     "/mrds_jax/geom_lid</script>"]


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_viewer_screenshot_in_headless_chromium(fourbar_scene, tmp_path):
    """The viewer page renders in a real browser: the screenshot shows the sticks (their colours) over the
    viewer's background."""
    *_, sc = fourbar_scene
    html = tmp_path / "fourbar.html"
    viewer_html(sc, html)
    png = screenshot(html, tmp_path / "fourbar.png", size=(640, 480))
    from PIL import Image
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    assert img.shape == (480, 640, 3)
    blue = (img[..., 2] > img[..., 0] + 60) & (img[..., 2] > img[..., 1] + 20)      # module 0 sticks (#1f77b4)
    orange = (img[..., 0] > img[..., 2] + 80) & (img[..., 1] > 60)                  # module 1 sticks (#ff7f0e)
    assert blue.sum() > 50 and orange.sum() > 50, (blue.sum(), orange.sum())


@pytest.fixture(scope="module")
def incline_scene():
    """A cube resting on a plane tilted 20° about x (μ = 0.3 < tan 20°: it slides), with a small sphere on its top
    face that never touches the plane: 5 slots, 4 of them touching once the first step has run."""
    import mrds_jax as mj
    from mrds_jax import collision as C
    theta = np.deg2rad(20.0)
    R = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(theta), -np.sin(theta)], [0.0, np.sin(theta), np.cos(theta)]])
    b = mj.ModuleBuilder()
    b.add_link("box", None, "free", mass=1.0, inertia=np.eye(3) / 150)
    b.add_frame("centre", "box")
    system = S.build_system({"box": b.build()}, [], collision=[
        C.plane("incline", rotation=R, friction=0.3), C.box("cube", "box", "centre", (0.1, 0.1, 0.1), friction=0.3),
        C.sphere("marker", "box", "centre", 0.02, position=(0.0, 0.0, 0.1))])
    c = R @ [0.0, 0.0, 0.1]
    q0 = jnp.array([*c, np.cos(theta / 2), np.sin(theta / 2), 0.0, 0.0])
    tr = S.simulate(system, S.SystemState((q0,), (jnp.zeros(6),)), 1e-3, 40, output=S.Output(decimation=10))
    return R, tr, make_scene(system, tr)


def _clip(cmds, path):
    (anim,) = [c for c in cmds if c["type"] == "set_animation"]
    clips = {a["path"]: a["clip"] for a in anim["animations"]}
    return {t["name"]: [k["value"] for k in t["keys"]] for t in clips[path]["tracks"]}


def test_viewer_draws_the_incline_at_its_pose_and_only_touching_slots(incline_scene):
    """The plane is drawn turned as the model has it (its quaternion is the 20° turn about x), its slab's top face
    in the plane and under the motion; no other floor; the contact points (and their force arrows) are drawn at
    full size only at the stored states where their slot carries a normal impulse: the cube's four corners after
    the first step, the marker sphere's slot never; the arrows' scale is written in the page's label."""
    from mrds_jax.viz.viewer import FORCE_LENGTH, PLANE_THICKNESS, force_scale
    R, tr, sc = incline_scene
    cmds = scene_commands(sc)
    assert not [c for c in cmds if "floor" in c.get("path", "")]
    plane = _clip(cmds, "/mrds_jax/geom_incline")
    theta = np.deg2rad(20.0)
    n = R[:, 2]
    side = [c for c in cmds if c["type"] == "set_object" and c["path"] == "/mrds_jax/geom_incline"][0]
    depth = side["object"]["geometries"][0]["depth"]
    for quat, pos in zip(plane[".quaternion"], plane[".position"]):
        np.testing.assert_allclose(quat, [np.sin(theta / 2), 0.0, 0.0, np.cos(theta / 2)], atol=1e-12)
        np.testing.assert_allclose(np.dot(pos, n), -depth / 2, atol=1e-12)      # its top face is the plane
    assert depth == pytest.approx(PLANE_THICKNESS * float(side["object"]["geometries"][0]["width"]))
    touching = sc.in_contact()
    assert touching.shape == (5, 5) and not touching[0].any()
    assert touching[1:, :4].all() and not touching[:, 4].any()                  # four corners; the marker never
    for c in range(5):
        sphere, arrow = _clip(cmds, f"/mrds_jax/contact{c}"), _clip(cmds, f"/mrds_jax/force{c}")
        for i in range(5):
            big = np.min(sphere[".scale"][i]) > 1e-6
            assert big == touching[i, c] and (np.min(arrow[".scale"][i]) > 1e-6) == touching[i, c], (i, c)
    # the typical corner force drawn FORCE_LENGTH half sizes of the motion long, and the label says the scale
    f = np.linalg.norm(sc.forces, axis=-1)[touching]
    np.testing.assert_allclose(force_scale(sc) * np.percentile(f, 95), FORCE_LENGTH * sc.extent()[1], rtol=1e-12)
    html = viewer_html(sc)
    assert re.search(r'id="mrds-force-scale">force arrows \(red\): [\d.]+ cm = [\d.]+ N<', html)


def test_animation_outlines_each_geom():
    """The GIF's line drawing: a box's twelve edges, each as long as the box along its axis; a sphere's three
    great circles on its surface; a capsule's end circles at ±half length and its caps reaching ±(half length +
    radius)."""
    from mrds_jax.viz.animation import geom_outline
    edges = geom_outline("box", (0.1, 0.2, 0.3))
    assert len(edges) == 12
    np.testing.assert_allclose(sorted(np.linalg.norm(e[1] - e[0]) for e in edges), [0.2] * 4 + [0.4] * 4 + [0.6] * 4)
    for ring in geom_outline("sphere", (0.05, 0, 0)):
        np.testing.assert_allclose(np.linalg.norm(ring, axis=1), 0.05, rtol=1e-12)
    cap = np.concatenate(geom_outline("capsule", (0.05, 0.2, 0)))
    assert cap[:, 2].max() == pytest.approx(0.25) and cap[:, 2].min() == pytest.approx(-0.25)
    assert np.linalg.norm(cap[:, :2], axis=1).max() == pytest.approx(0.05)


def test_a_subsampled_scene_keeps_its_fields_aligned(incline_scene):
    """Every other stored state of the incline run: sticks, points, forces, contact flags and geom poses all at the
    same states (the viewer's drawing commands build from it), the kept states those of the full scene."""
    *_, sc = incline_scene
    half = sc.subsampled(2)
    n = len(half.t)
    assert n == 3 and half.segments.shape[0] == half.points.shape[0] == half.forces.shape[0] == n
    assert half.in_contact().shape == (n, 5) and all(poses.shape[0] == n for *_, poses in half.geoms)
    np.testing.assert_array_equal(half.in_contact(), sc.in_contact()[::2])
    np.testing.assert_array_equal(half.geoms[0][3], sc.geoms[0][3][::2])
    assert scene_commands(half)


# --- the contact scenes in a real browser -------------------------------------------------------------------------
# ``mrds-jax simulate NAME --viewer`` on the ready-made contact scenes, shortened (duration in the copy of the file;
# no plots), the page rendered in headless Chromium held at one frame: what three.js drew there (the page's own
# summary, read after its scripts ran) and the screenshot, against the system file and the run's trajectory.npz.
CONTACT_RUNS = {"box_incline": "0.05 s", "dual_arm_friction_grasp": "0.05 s", "quadruped_ground": "0.03 s"}
FLOOR_COLOUR = "light grey-beige: r > 150, |r - g| < 12, 3 < r - b < 30"     # the plane's slab, lit (#d8d8d0)


def floor_pixels(img):
    """Where the screenshot shows the plane's colour (:data:`FLOOR_COLOUR`; the sky, the label, the bodies and
    sticks are not)."""
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    return (r > 150) & (abs(r - g) < 12) & (r - b > 3) & (r - b < 30)


@pytest.fixture(scope="module")
def contact_runs(tmp_path_factory):
    """name → (output folder): each scene run once, in process, through the command line, on first use."""
    from mrds_jax.cli import main
    from mrds_jax.sysfile import example_files
    folder, done = tmp_path_factory.mktemp("contact_viewer"), {}

    def run(name):
        if name not in done:
            text = re.sub(r"^duration = .*$", f'duration = "{CONTACT_RUNS[name]}"', example_files()[name].read_text(),
                          flags=re.M)
            short = folder / f"{name}.toml"
            short.write_text(text.replace("[output]\n", "[output]\nplots = false\n"))
            args = ["simulate", str(short), "--viewer", "--out", str(folder / name), "--animation", "none",
                    "--no-progress", "--no-cache"]
            assert main(args) == 0
            done[name] = folder / name
        return done[name]
    return run


def shown_in_browser(out, frame, tmp_path):
    """The page of a run held at ``frame`` in headless Chromium: (screenshot as an int array, what it drew), and
    the run's touching slots at that frame (the active set: a normal impulse over the step, hence a force)."""
    import json

    from PIL import Image

    from mrds_jax.viz.viewer import pixel_coordinates, render_viewer
    png, drawn = render_viewer(out / "viewer.html", tmp_path / f"{out.name}_{frame}.png", frame=frame)
    data = np.load(out / "trajectory.npz")
    assert json.loads((out / "trajectory.json").read_text())["contacts"] == []   # no loop joints: markers = slots
    active = data["contact/active"]
    touching = np.flatnonzero(active[frame])
    # a touching slot carries force, the others none
    assert (np.linalg.norm(data["contact/forces"][frame], axis=-1) > 0).tolist() == active[frame].tolist()
    assert drawn["frame"] == frame
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    # the camera frames the motion: every geom's centre is in the picture, away from its edges
    centres = np.array([g["pose"][:3, 3] for g in drawn["geoms"].values()])
    px = pixel_coordinates(drawn["camera"], centres, (img.shape[1], img.shape[0]))
    assert ((px > 0.1 * np.array([img.shape[1], img.shape[0]])) & (px < 0.9 * np.array([img.shape[1], img.shape[0]]))).all(), px
    return img, drawn, touching, active.shape[1]


def square_mask(drawn, name, R, size):
    """The pixels inside the top face of the plane ``name``'s slab (drawn size, drawn centre) turned by R."""
    from PIL import Image, ImageDraw

    from mrds_jax.viz.viewer import pixel_coordinates
    lo, hi = drawn["geoms"][name]["box"]
    centre = drawn["geoms"][name]["pose"][:3, 3]
    corners = np.array([[x, y, hi[2]] for x, y in [(lo[0], lo[1]), (hi[0], lo[1]), (hi[0], hi[1]), (lo[0], hi[1])]])
    px = pixel_coordinates(drawn["camera"], corners @ R.T + centre, size)
    mask = Image.new("1", size)
    ImageDraw.Draw(mask).polygon([tuple(p) for p in px], fill=1)
    return np.asarray(mask)


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_browser_draws_the_incline_at_its_pose_and_only_touching_slots(contact_runs, tmp_path):
    """``box_incline`` (its file: the plane turned 20° about x) in headless Chromium, at its first frame (no slot
    has touched yet) and its last (the cube's four corners): the plane three.js drew is turned by exactly
    R_x(20°), its slab's top face in the plane; the plane's colour fills the projected tilted square in the
    screenshot (and not a level one: that fit is worse by > 0.1); the contact points and force arrows drawn are
    the touching slots, none at the first frame; no floor, grid or other object besides the model's geoms."""
    out = contact_runs("box_incline")
    theta = np.deg2rad(20.0)
    R = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(theta), -np.sin(theta)], [0.0, np.sin(theta), np.cos(theta)]])
    last = round(0.05 / 0.01)                                                  # dt 1 ms, decimation 10
    for frame in (0, last):
        img, drawn, touching, n_slots = shown_in_browser(out, frame, tmp_path)
        assert set(drawn["geoms"]) == {"incline", "cube"} and drawn["others"] == [] and not drawn["grid"]
        pose, (lo, hi) = drawn["geoms"]["incline"]["pose"], drawn["geoms"]["incline"]["box"]
        np.testing.assert_allclose(pose[:3, :3], R, atol=1e-6)                 # three.js keys are float32
        assert abs(np.dot(R[:, 2], pose[:3, :3] @ [0.0, 0.0, hi[2]] + pose[:3, 3])) < 1e-6 * (hi[0] - lo[0])
        size = (img.shape[1], img.shape[0])
        floor = floor_pixels(img)
        iou = {k: (m & floor).sum() / (m | floor).sum()
               for k, m in (("tilted", square_mask(drawn, "incline", R, size)),
                            ("level", square_mask(drawn, "incline", np.eye(3), size)))}
        assert iou["tilted"] > 0.9 and iou["level"] < iou["tilted"] - 0.1, iou
        assert drawn["contacts"] == drawn["forces"] == touching.tolist(), (drawn, touching)
        assert len(touching) == (0 if frame == 0 else 4) and n_slots == 4


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_browser_draws_the_grasp_without_a_floor_and_only_its_touching_fingertips(contact_runs, tmp_path):
    """``dual_arm_friction_grasp`` (two arms, a box, four fingertip spheres; no plane) in headless Chromium, at a
    frame where some but not all of its fingertip slots touch: exactly those contact points and force arrows are
    drawn; the geoms drawn are the file's five, no floor (no other object, no floor-coloured pixels) and no grid."""
    out = contact_runs("dual_arm_friction_grasp")
    active = np.load(out / "trajectory.npz")["contact/active"]
    some = [k for k, a in enumerate(active) if 0 < a.sum() < a.size]
    assert some, active
    img, drawn, touching, n_slots = shown_in_browser(out, some[0], tmp_path)
    assert drawn["contacts"] == drawn["forces"] == touching.tolist() and 0 < len(touching) < n_slots
    assert set(drawn["geoms"]) == {"box", "arm1_tip0", "arm1_tip1", "arm2_tip0", "arm2_tip1"}
    assert drawn["others"] == [] and not drawn["grid"] and floor_pixels(img).sum() < 50, floor_pixels(img).sum()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium")
def test_browser_draws_the_quadruped_on_its_level_floor(contact_runs, tmp_path):
    """``quadruped_ground`` (its floor: a level plane) at its last frame: the plane drawn level (identity turn),
    the floor's colour filling its projected square, its four sphere feet the touching slots drawn."""
    out = contact_runs("quadruped_ground")
    img, drawn, touching, n_slots = shown_in_browser(out, 3, tmp_path)
    np.testing.assert_allclose(drawn["geoms"]["floor"]["pose"][:3, :3], np.eye(3), atol=1e-6)
    mask = square_mask(drawn, "floor", np.eye(3), (img.shape[1], img.shape[0]))
    floor = floor_pixels(img)
    assert (mask & floor).sum() / (mask | floor).sum() > 0.9
    assert drawn["contacts"] == drawn["forces"] == touching.tolist() == [0, 1, 2, 3] and n_slots == 4
    assert drawn["others"] == [] and not drawn["grid"]
