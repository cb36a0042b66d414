"""URDF ``<collision>`` primitives (``load_urdf(..., return_collision=True)``) against MuJoCo's own URDF compiler:
the same geoms (kinds, sizes, world poses at a configuration), the same candidate pairs, and the same gap where
both compute the distance exactly; meshes are named in a warning."""
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

from mrds_jax.collision import CollisionWarning, contact_slots, geom_world_pose
from mrds_jax.dynamics.interface import point_motion
from mrds_jax.loaders.urdf import load_urdf

MESH = '<collision name="finger"><geometry><mesh filename="finger.stl"/></geometry></collision>'
URDF = f"""<robot name="r">
  <link name="base">
    <inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision name="base_box"><origin xyz="0 0 0.05" rpy="0 0 0.3"/><geometry><box size="0.4 0.3 0.1"/></geometry>
    </collision>
  </link>
  <link name="arm">
    <inertial><origin xyz="0 0 0.2"/><mass value="1"/>
      <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="0 0 0.2" rpy="0.1 0 0"/><geometry><cylinder radius="0.04" length="0.4"/></geometry>
    </collision>
    <collision name="elbow"><origin xyz="0 0 0.4"/><geometry><sphere radius="0.06"/></geometry></collision>
  </link>
  <link name="hand">
    <inertial><mass value="0.2"/><inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision name="palm"><origin xyz="0.05 0 0" rpy="0 0.2 0"/><geometry><box size="0.1 0.08 0.02"/></geometry>
    </collision>
    {MESH}
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 1 0"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>
  <joint name="wrist" type="fixed"><parent link="arm"/><child link="hand"/><origin xyz="0 0 0.45" rpy="0 0 0.5"/>
  </joint>
</robot>
"""
ANGLE = 2.2        # the arm leans down beside the base: the elbow sphere 0.11 from the box


def test_urdf_collision_geoms_equal_mujocos(tmp_path):
    path = tmp_path / "r.urdf"
    path.write_text(URDF)
    with pytest.warns(CollisionWarning) as record:
        module, collision = load_urdf(path, return_collision=True)
    text = "\n".join(str(w.message) for w in record)
    assert "'finger' (mesh)" in text
    assert collision.geom_names == ("base_box", "arm:collision0", "elbow", "palm")
    assert collision.geoms[0].is_ground and collision.geoms[3].frame == "hand"
    assert {frozenset(p) for p in collision.pair_names()} == {frozenset(["base_box", "elbow"]),
                                                              frozenset(["base_box", "palm"]),
                                                              frozenset(["base_box", "arm:collision0"])}

    model = mujoco.MjModel.from_xml_string(URDF.replace(MESH, ""))
    data = mujoco.MjData(model)
    data.qpos[:] = ANGLE
    mujoco.mj_forward(model, data)
    points = tuple(module.frame_index(f) for f in ("arm", "hand"))

    @jax.jit
    def poses_and_slots(module, collision, q):
        motion = point_motion(module, q, jnp.zeros(1), points)
        frames = {"arm": (motion.R[0], motion.p[0]), "hand": (motion.R[1], motion.p[1])}
        poses = [geom_world_pose(g, *frames.get(g.frame, (None, None))) for g in collision.geoms]
        return poses, contact_slots(collision, poses)

    poses, slots = poses_and_slots(module, collision, jnp.array([ANGLE]))
    for k, (g, (R, p)) in enumerate(zip(collision.geoms, poses)):
        np.testing.assert_allclose(p, data.geom_xpos[k], atol=1e-12, err_msg=g.name)
        np.testing.assert_allclose(R, data.geom_xmat[k].reshape(3, 3), atol=1e-12, err_msg=g.name)
        np.testing.assert_allclose(g.size, model.geom_size[k], atol=1e-15, err_msg=g.name)
    k = collision.pair_names().index(("elbow", "base_box"))
    reference = mujoco.mj_geomDistance(model, data, 0, 2, 10.0, None)       # MuJoCo's narrow phase, separated
    np.testing.assert_allclose(slots.gap[np.asarray(slots.pair) == k], [reference], atol=1e-12)
    k = collision.pair_names().index(("base_box", "arm:collision0"))     # box–cylinder: GJK in both
    reference = mujoco.mj_geomDistance(model, data, 0, 1, 10.0, None)
    np.testing.assert_allclose(slots.gap[np.asarray(slots.pair) == k], [reference], atol=1e-9)
