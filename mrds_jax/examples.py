"""Ready-made systems for examples, benchmarks and notebooks.

* :func:`serial_arm` — an n-link spatial arm with revolute joints about alternating axes.
* :func:`dual_arm_grasp` — two such arms rigidly grasping one free box (Lilly & Orin Type 0; two Type A
  weld contacts), with a consistent initial state.
* :func:`dual_arm_friction_grasp` — the same two arms holding an upright box by friction alone (Bonaventura's Class
  II contact): two sphere fingertips per hand press the box's side faces with a squeeze force that a schedule
  switches off (release) and on again (regrasp).
* :func:`multi_arm_grasp` — m such arms of N links holding one free object at point contacts (spherical,
  n_c = 3; Lilly & Orin Type 0, the case of their Tables 2-3), with a consistent initial state: the system
  family for cost-versus-m and cost-versus-N studies.
* :func:`bonaventura_system` — Bonaventura's six validation systems of flexible robots (Ch. 8.3, Tables 21-33:
  "1", "2a"-"2c", "3", "4", "5a"-"5c", "6a", "6b"), built from assumed-modes flexible-link modules
  (:mod:`mrds_jax.flexible`), with their motor torques and a consistent initial state.
The CKCM Stewart platform lives in :mod:`mrds_jax.ckcm`.
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import contacts as C
from .dynamics import forward_kinematics, frame_placement
from .flexible.systems import bonaventura_system  # noqa: F401
from .model import ModuleBuilder
from .spatial import compose, inverse, rotation_to_quat
from .system import SystemState, build_system


def serial_arm(n=6, link_length=0.3, mass=2.0, base=(0.0, 0.0, 0.0), mass_decay=0.8, gravity=None):
    """n revolute links alternating about z and y, link i along x; operational point "tip" at the end.
    Link i has mass ``mass * mass_decay**i``; ``gravity``: the builder's (default −9.81 m/s² along z)."""
    b = ModuleBuilder(gravity=gravity)
    parent = None
    for i in range(n):
        name = f"link{i + 1}"
        m = mass * (mass_decay ** i)
        b.add_link(name, parent, "revolute", axis=(0, 0, 1) if i % 2 == 0 else (0, 1, 0),
                   position=base if parent is None else (link_length, 0.0, 0.0), mass=m,
                   com=(link_length / 2, 0.0, 0.0),
                   inertia=m * np.diag([1e-3, link_length ** 2 / 12 + 1e-3, link_length ** 2 / 12 + 1e-3]))
        parent = name
    b.add_frame("tip", parent, position=(link_length, 0.0, 0.0))
    return b.build()


def dual_arm_grasp(n=6, q1=None, q2=None):
    """(system, state): arms "arm1" (base at y = −0.4) and "arm2" (y = +0.4) welded to a 3 kg box at its
    grasp points "g1", "g2"; arm 2's tip frame is placed so that the initial state (given arm angles, zero
    velocity) satisfies both welds exactly."""
    q1 = np.array([0.3, 0.6, -0.4, 0.8, 0.2, -0.5][:n] + [0.0] * max(0, n - 6)) if q1 is None else np.asarray(q1)
    q2 = np.array([-0.3, 0.5, 0.3, 0.7, -0.2, 0.4][:n] + [0.0] * max(0, n - 6)) if q2 is None else np.asarray(q2)
    arm1, arm2 = serial_arm(n, base=(0.0, -0.4, 0.0)), serial_arm(n, base=(0.0, 0.4, 0.0))
    b = ModuleBuilder()
    b.add_link("box", joint="free", mass=3.0, inertia=np.diag([0.02, 0.03, 0.04]))
    b.add_frame("g1", "box", position=(0.0, -0.1, 0.0))
    b.add_frame("g2", "box", position=(0.0, 0.1, 0.0))
    box = b.build()
    R_t1, p_t1 = frame_placement(arm1, forward_kinematics(arm1, jnp.asarray(q1)), "tip")
    R_g1, p_g1 = box.params.frame_R[0], box.params.frame_p[0]
    R_box, p_box = compose(R_t1, p_t1, *inverse(R_g1, p_g1))          # box pose from grasp 1
    R_g2w, p_g2w = compose(R_box, p_box, box.params.frame_R[1], box.params.frame_p[1])
    kin2 = forward_kinematics(arm2, jnp.asarray(q2))
    last = arm2.topology.n_links - 1
    R_tip, p_tip = compose(*inverse(kin2.world_R[last], kin2.world_p[last]), R_g2w, p_g2w)
    arm2 = arm2.with_params(frame_R=arm2.params.frame_R.at[0].set(R_tip), frame_p=arm2.params.frame_p.at[0].set(p_tip))
    contacts = [C.weld("grasp1", ("arm1", "tip"), ("box", "g1")), C.weld("grasp2", ("arm2", "tip"), ("box", "g2"))]
    system = build_system({"arm1": arm1, "arm2": arm2, "box": box}, contacts)
    q_box = jnp.concatenate([p_box, rotation_to_quat(R_box)])
    state = SystemState((jnp.asarray(q1, float), jnp.asarray(q2, float), q_box),
                        (jnp.zeros(n), jnp.zeros(n), jnp.zeros(6)))
    return system, state


def _squeeze(t, state, params):
    """The squeeze force of one hand: ``force`` (world axes) while t < release or t ≥ regrasp, else zero."""
    force, release, regrasp = params
    return force * ((t < release) | (t >= regrasp))


class FrictionGrasp(NamedTuple):
    """:func:`dual_arm_friction_grasp`'s system, consistent initial state (at rest, the fingertips touching the
    box) and force elements (the arms' joint springs, the two hands' squeeze forces)."""
    system: object
    state: object
    forces: tuple


def dual_arm_friction_grasp(n=6, q1=None, q2=None, mu=0.5, squeeze=40.0, release=np.inf, regrasp=np.inf,
                            box_mass=3.0, half_extents=(0.05, 0.1, 0.12), tip_radius=0.02, tip_spacing=0.02,
                            stiffness=2000.0, damping=5.0):
    """Two ``serial_arm(n)`` arms ("arm1", base at y = −0.4, and "arm2", y = +0.4; the joint angles of
    :func:`dual_arm_grasp`) holding a free upright box ("box", ``box_mass``, ``half_extents``) by friction alone:
    no bilateral contact, each hand (the arm's operational point "tip", placed on the middle of the box's −y or
    +y face) carries two sphere fingertips of ``tip_radius`` ``tip_spacing`` above and below its centre that
    touch the face (gap 0 at the initial state), Coulomb friction ``mu`` (four frictional contact slots).

    Each hand presses the box with ``squeeze`` N along ±y (a point force at its tip), on except between the
    times ``release`` and ``regrasp`` (traced: a new schedule recompiles nothing). The arms are taken as
    gravity-compensated (gravity-free modules; the box has gravity) and hold their pose by joint springs of
    ``stiffness`` N m/rad with dampers of ``damping`` N m s/rad about the initial joint angles.

    Statics (Coulomb): the box's weight m g is held by the four fingertips' friction, at most μ · 2 · squeeze, so
    the grasp holds when squeeze ≥ m g / (2 μ) (29.4 N for the defaults) and the box slides down between the
    fingertips with a = g − 2 μ squeeze / m when the squeeze is less. Returns a :class:`FrictionGrasp`."""
    from . import collision as CL
    from .system import joint_spring_damper, point_force
    q1 = np.array([0.3, 0.6, -0.4, 0.8, 0.2, -0.5][:n] + [0.0] * max(0, n - 6)) if q1 is None else np.asarray(q1)
    q2 = np.array([-0.3, 0.5, 0.3, 0.7, -0.2, 0.4][:n] + [0.0] * max(0, n - 6)) if q2 is None else np.asarray(q2)
    arms = {"arm1": serial_arm(n, base=(0.0, -0.4, 0.0), gravity=(0.0, 0.0, 0.0)),
            "arm2": serial_arm(n, base=(0.0, 0.4, 0.0), gravity=(0.0, 0.0, 0.0))}
    last = n - 1
    kins = {name: forward_kinematics(arm, jnp.asarray(q)) for (name, arm), q in zip(arms.items(), (q1, q2))}
    ends = [kins[name].world_p[last] for name in arms]                   # jnp throughout: the builder traces
    hx, hy, hz = (float(h) for h in half_extents)
    p_box = 0.5 * (ends[0] + ends[1])                                     # upright, between the last links
    b = ModuleBuilder()
    b.add_link("box", joint="free", mass=box_mass,
               inertia=box_mass / 3.0 * np.diag([hy ** 2 + hz ** 2, hx ** 2 + hz ** 2, hx ** 2 + hy ** 2]))
    b.add_frame("centre", "box")
    box = b.build()
    geoms = [CL.box("box", "box", "centre", (hx, hy, hz), friction=mu)]
    forces = []
    for (name, arm), side in zip(list(arms.items()), (-1.0, 1.0)):
        face = p_box + jnp.array([0.0, side * hy, 0.0])                   # the hand: middle of the face, world axes
        kin = kins[name]
        R_tip, p_tip = compose(*inverse(kin.world_R[last], kin.world_p[last]), jnp.eye(3, dtype=face.dtype), face)
        arms[name] = arm.with_params(frame_R=arm.params.frame_R.at[0].set(R_tip),
                                     frame_p=arm.params.frame_p.at[0].set(p_tip))
        for k, dz in enumerate((tip_spacing, -tip_spacing)):
            geoms.append(CL.sphere(f"{name}_tip{k}", name, "tip", tip_radius, position=(0.0, side * tip_radius, dz),
                                   friction=mu, conaffinity=0))           # fingertips touch the box, not each other
        forces.append(joint_spring_damper(f"{name}_hold", name, stiffness, damping, springref=jnp.asarray(
            q1 if name == "arm1" else q2, float), nq=n, nv=n))
        forces.append(point_force(f"{name}_squeeze", (name, "tip"), _squeeze,
                                  (jnp.array([0.0, -side, 0.0]) * jnp.asarray(squeeze, float),
                                   jnp.asarray(release, float), jnp.asarray(regrasp, float))))
    system = build_system({**arms, "box": box}, [], collision=geoms)
    q_box = jnp.concatenate([p_box, jnp.array([1.0, 0.0, 0.0, 0.0], dtype=p_box.dtype)])
    state = SystemState((jnp.asarray(q1, float), jnp.asarray(q2, float), q_box),
                        (jnp.zeros(n), jnp.zeros(n), jnp.zeros(6)))
    return FrictionGrasp(system, state, tuple(forces))


def multi_arm_grasp(m=3, n=6, radius=0.6, reach=0.9, q=None):
    """(system, state): ``m`` identical ``serial_arm(n)`` arms ("arm1" ... "arm{m}") holding one free 3 kg box
    ("object") by spherical contacts ("grasp{k}": arm k's tip on the object's point "g{k}"), zero velocity.

    The arms' bases sit on a circle of ``radius`` around the origin; every arm has the same joint angles
    ``q`` (default alternating 0.3, 0.5, -0.4, ...), link length ``reach / n`` and mass decay 0.95 per link
    (so long arms keep non-negligible link masses). The object's origin is placed at the mean of the tips and
    its grasp points where the tips are, so the state is consistent for any ``q``. Spherical contacts
    (n_c = 3) keep the constraints independent for any n >= 3: n = 6 is Lilly & Orin's N = 6, n_c = 3
    example (Tables 2-3). Identical arms are stacked and vmapped by ``build_system``; the object is the
    reference member of the Lilly fast path."""
    if m < 1 or n < 3:
        raise ValueError(f"multi_arm_grasp needs m >= 1 arms of n >= 3 links (point contacts), got m={m}, n={n}")
    pattern = np.array([0.3, 0.5, -0.4, 0.6, 0.2, -0.5])
    q = np.resize(pattern, n) if q is None else np.asarray(q, float)
    angles = 2 * np.pi * np.arange(m) / m
    arms = [serial_arm(n, link_length=reach / n, base=(radius * np.cos(a), radius * np.sin(a), 0.0),
                       mass_decay=0.95) for a in angles]
    tips = np.stack([np.asarray(frame_placement(arm, forward_kinematics(arm, jnp.asarray(q)), "tip")[1])
                     for arm in arms])
    centre = tips.mean(axis=0)
    b = ModuleBuilder()
    b.add_link("object", joint="free", mass=3.0, inertia=np.diag([0.02, 0.03, 0.04]))
    for k in range(m):
        b.add_frame(f"g{k + 1}", "object", position=tuple(tips[k] - centre))
    obj = b.build()
    names = [f"arm{k + 1}" for k in range(m)]
    contacts = [C.spherical(f"grasp{k + 1}", (names[k], "tip"), ("object", f"g{k + 1}")) for k in range(m)]
    system = build_system(dict(zip(names + ["object"], arms + [obj])), contacts)
    q_obj = jnp.concatenate([jnp.asarray(centre), jnp.array([1.0, 0.0, 0.0, 0.0])])
    state = SystemState(tuple(jnp.asarray(q, float) for _ in range(m)) + (q_obj,),
                        tuple(jnp.zeros(n) for _ in range(m)) + (jnp.zeros(6),))
    return system, state
