"""See it move: the stick-figure scene of a trajectory, the browser viewer built from it, and (marked
``browser``) a screenshot of the viewer in a real headless Chromium.

The scene's sticks end at the link origins MuJoCo computes for the same MJCF state (``xpos``: an engine
nobody here wrote), its contact forces are the world-axes ``F_EP`` of our forward dynamics, and the viewer's
drawing commands place a unit cylinder exactly on each stick (quaternion turning e_y onto it, scaled to its
length).
"""
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax import system as S
from mrds_jax.integrate import Trajectory
from mrds_jax.loaders.mjcf import load_mjcf
from mrds_jax.sysfile import EXAMPLES
from mrds_jax.viz import scene as make_scene
from mrds_jax.viz.viewer import find_browser, scene_commands, screenshot, viewer_html
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
    (floor,) = [c["matrix"] for c in cmds if c["type"] == "set_transform" and c["path"] == "/mrds_jax_floor"]
    lowest = sc.segments[..., 2].min()                              # the floor lies just under the lowest point
    assert lowest - 0.01 < np.asarray(floor).reshape(4, 4, order="F")[2, 3] <= lowest
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


@pytest.mark.browser
@pytest.mark.skipif(find_browser() is None, reason="needs a headless Chromium: apt-get install chromium-headless-shell")
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
