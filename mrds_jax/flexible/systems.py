"""Bonaventura's six validation systems of flexible robots (Ch. 8.3, Tables 21-33), ready to simulate.

Every link: Table 22's aluminium strip (ρ = 0.448 kg/m, EI = 3.7333 N m²), two cantilevered modes per
flexible link unless stated (Appendix C: "MRDS" used two, System 5c three on the first link); motor torques
τᵢ = Aᵢ sin(2π t / Tᵢ) (Bonaventura eq. 134) with the tables' amplitudes and periods; the plane is horizontal (no
gravity). Each function returns a :class:`FlexibleScenario`: the system, a consistent initial state at rest,
the force elements (motor torques on module joints, actuated revolute contacts for joints between modules),
and the manoeuvre's duration.

The thesis gives the torques, lengths, tip mass and contacts but not every initial configuration (they are
only visible in its plots); the ones used here are chosen and stated in each docstring.

=========  ========================================================================  ===========  ========
system     mechanism (modules; contacts)                                              torques      duration
=========  ========================================================================  ===========  ========
1          one 1 m link, fixed base                                                   Table 23     10 s
2a         two-link robot 1 m + 0.5 m, fixed base, link 2 at 90°                      Table 24     10 s
2b         as 2a with a 0.5 kg tip mass                                               Table 25     10 s
2c         as 2a, tip sliding along x at y = 0.6 m, free rotation (point on line)     Table 26     10 s
3          two mobile one-link modules (1 m, 0.5 m), revolute contacts; the base      Table 27     10 s
           revolute's x motion excited, ẋ = 0.1 sin(2π t / 5) (Bonaventura eq. 135)
4          two-link 1 m + 1 m (flexible) + two rigid mobile 0.1 m links, in series    Table 28     20 s
5a/5b/5c   two-link 1 m + 1 m + two mobile 1 m links, all flexible, in series         Tables 29-31 20/20/13 s
6a         two two-link robots (1 m + 1 m) joined at the tips by a revolute           Table 32     30 s
6b         as 6a with 0.5 m second links                                              Table 33     30 s
=========  ========================================================================  ===========  ========
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..contacts.library import planar_revolute, point_on_line
from ..system import SystemState, build_system
from ..system.forces import ContactForce
from .chain import flexible_chain, motor_torques

# (amplitudes A_i [N m], periods T_i [s]) of Bonaventura eq. 134, Tables 23-33
TORQUES = {
    "1": ((0.02948,), (10.0,)),
    "2a": ((0.105, 0.011), (10.0, 10.0)),
    "2b": ((0.315, 0.111), (10.0, 10.0)),
    "2c": ((0.0531, 0.0), (10.0, 10.0)),
    "3": ((0.105, 0.011), (10.0, 10.0)),
    "4": ((0.01, 0.001, -0.0002, -0.00001), (80.0, 80.0, 10.0, 10.0)),
    "5a": ((0.01, 0.002, -0.002, -0.0015), (20.0, 15.0, 20.0, 15.0)),
    "5b": ((-0.01, 0.04, -0.04, -0.02), (40.0, 15.0, 15.0, 30.0)),
    "5c": ((0.25, 0.15, 0.05, 0.01), (80.0, 80.0, 40.0, 40.0)),
    "6a": ((0.02, 0.0, 0.02, 0.0), (10.0,) * 4),
    "6b": ((0.195, -0.125, 0.45, 0.001), (10.0,) * 4),
}
DURATION = {"1": 10.0, "2a": 10.0, "2b": 10.0, "2c": 10.0, "3": 10.0, "4": 20.0, "5a": 20.0, "5b": 20.0,
            "5c": 13.0, "6a": 30.0, "6b": 30.0}
# Table 21: natural frequencies [rad/s] (System 1; Systems 2a, 2b with link 2 at 90 degrees)
TABLE_21 = {"1": dict(w11=10.2, w12=63.6), "2a": dict(w11=5.83, w12=49.6, w21=40.6, w22=254.0),
            "2b": dict(w11=3.68, w12=47.0, w21=12.8, w22=187.0)}


class FlexibleScenario(NamedTuple):
    """A ready system of Ch. 8.3: ``system``, initial ``state`` (at rest, consistent), ``forces`` (pass to
    :func:`mrds_jax.system.simulate`), ``duration`` [s] and its ``name``."""
    name: str
    system: object
    state: SystemState
    forces: tuple
    duration: float


def _sinusoid(t, state, params):
    A, T = params
    return jnp.reshape(A * jnp.sin(2.0 * jnp.pi * t / T), (1,))


def actuated_joint(name, contact, amplitude, period):
    """The torque of a joint between two modules (a revolute contact's free direction, Fᵘ = τ, Bonaventura eq. 26),
    τ = A sin(2π t / T) (Bonaventura eq. 134): +τ on the distal side P, −τ on E."""
    return ContactForce(params=(jnp.asarray(float(amplitude)), jnp.asarray(float(period))), name=name,
                        contact=contact, fn=_sinusoid)


def _q(*parts):
    return jnp.asarray(np.concatenate([np.atleast_1d(np.asarray(p, dtype=float)) for p in parts]))


def _state(modules, qs):
    return SystemState(tuple(qs), tuple(jnp.zeros(m.nv) for m in modules))


def _scenario(key, modules, contacts, qs, forces):
    mods = dict(modules)
    system = build_system(mods, contacts)
    return FlexibleScenario(key, system, _state(mods.values(), qs), tuple(forces), DURATION[key])


def system_1(n_modes=2, **kw):
    """System 1: one rotating 1 m flexible link, from rest at θ = 0 (Table 23 drives the equivalent rigid link
    rest to rest through 180°)."""
    robot = flexible_chain([1.0], n_modes, **kw)
    return _scenario("1", {"robot": robot}, [], [_q(0.0, np.zeros(robot.nv - 1))],
                     [motor_torques("motors", "robot", robot, *TORQUES["1"])])


def _two_link(key, n_modes, tip_mass=0.0, **kw):
    robot = flexible_chain([1.0, 0.5], n_modes, tip_mass=tip_mass, **kw)
    return robot, [motor_torques("motors", "robot", robot, *TORQUES[key])]


def system_2a(n_modes=2, **kw):
    """System 2a: two-link robot (1 m, 0.5 m), open chain, from rest with link 1 along x and link 2 at 90°
    (the configuration of Table 21)."""
    robot, forces = _two_link("2a", n_modes, **kw)
    return _scenario("2a", {"robot": robot}, [], [_q(0.0, np.pi / 2, np.zeros(robot.nv - 2))], forces)


def system_2b(n_modes=2, **kw):
    """System 2b: System 2a with a 0.5 kg point mass at the tip of link 2."""
    robot, forces = _two_link("2b", n_modes, tip_mass=0.5, **kw)
    return _scenario("2b", {"robot": robot}, [], [_q(0.0, np.pi / 2, np.zeros(robot.nv - 2))], forces)


def system_2c(n_modes=2, **kw):
    """System 2c: the two-link robot's tip slides along x at y = 0.6 m with free rotation (a frictionless
    planar point-on-line contact, n_c = 1); from rest with θ₁ = asin 0.6 and link 2 along x."""
    robot, forces = _two_link("2c", n_modes, **kw)
    th1 = np.arcsin(0.6)
    slide = point_on_line("slide", None, ("robot", "tip"), direction=(1.0, 0.0, 0.0), planar=True,
                          ground_position=(0.0, 0.6, 0.0))
    return _scenario("2c", {"robot": robot}, [slide], [_q(th1, -th1, np.zeros(robot.nv - 2))], forces)


def system_2a_in_series(n_modes=2, **kw):
    """System 2a built from two modules (Ch. 6.6, §8.2): a fixed-base one-link module (1 m) and a mobile
    one-link module (0.5 m) joined by a revolute contact whose free direction carries motor 2's torque —
    the same physical system as :func:`system_2a`, so the same motion."""
    link1 = flexible_chain([1.0], n_modes, **kw)
    link2 = flexible_chain([0.5], n_modes, mobile_base=True, **kw)
    (A1, A2), (T1, T2) = TORQUES["2a"]
    contacts = [planar_revolute("joint2", ("link1", "tip"), ("link2", "base"))]
    forces = [motor_torques("motor1", "link1", link1, [A1], [T1]), actuated_joint("motor2", "joint2", A2, T2)]
    return _scenario("2a", {"link1": link1, "link2": link2}, contacts,
                     [_q(0.0, np.zeros(link1.nv - 1)), _q(1.0, 0.0, np.pi / 2, np.zeros(link2.nv - 3))], forces)


def excited_base(t):
    """System 3's base motion, Bonaventura eq. 135: (ẋᶜ, ẍᶜ) of the base revolute's constrained [x, y] = (0.1 sin(2π t/5), 0)."""
    w = 2.0 * jnp.pi / 5.0
    return jnp.stack([0.1 * jnp.sin(w * t), 0.0 * t]), jnp.stack([0.1 * w * jnp.cos(w * t), 0.0 * t])


def system_3(n_modes=2, excitation=True, **kw):
    """System 3: the two-link robot of System 2 built from two mobile one-link modules (1 m and 0.5 m) joined
    by an actuated revolute contact, the first module's base held by a revolute contact to a base moving along
    x with ẋ = 0.1 sin(2π t / 5) (Bonaventura eq. 135, the contact's excited constrained mode; ``excitation=False``: a
    fixed base, the serial-connection twin of System 2a, Ch. 6.6). From rest in System 2a's configuration."""
    link1 = flexible_chain([1.0], n_modes, mobile_base=True, **kw)
    link2 = flexible_chain([0.5], n_modes, mobile_base=True, **kw)
    (A1, A2), (T1, T2) = TORQUES["3"]
    contacts = [planar_revolute("base", None, ("link1", "base"), excitation=excited_base if excitation else None),
                planar_revolute("joint2", ("link1", "tip"), ("link2", "base"))]
    forces = [motor_torques("motor1", "link1", link1, [A1], [T1]), actuated_joint("motor2", "joint2", A2, T2)]
    return _scenario("3", {"link1": link1, "link2": link2}, contacts,
                     [_q(0.0, 0.0, 0.0, np.zeros(link1.nv - 3)), _q(1.0, 0.0, np.pi / 2, np.zeros(link2.nv - 3))],
                     forces)


def _four_link(key, lengths, modes, angles):
    """Two-link fixed-base module + two mobile one-link modules in series (Systems 4, 5): absolute link
    angles ``angles`` at rest, actuated revolute contacts for joints 3 and 4."""
    robot = flexible_chain(lengths[:2], modes[:2])
    links = [flexible_chain([lengths[k]], modes[k], mobile_base=True) for k in (2, 3)]
    A, T = TORQUES[key]
    tips = np.cumsum([np.zeros(2)] + [L * np.array([np.cos(a), np.sin(a)]) for L, a in zip(lengths, angles)], axis=0)
    contacts = [planar_revolute("joint3", ("robot", "tip"), ("link3", "base")),
                planar_revolute("joint4", ("link3", "tip"), ("link4", "base"))]
    forces = [motor_torques("motors", "robot", robot, A[:2], T[:2]),
              actuated_joint("motor3", "joint3", A[2], T[2]), actuated_joint("motor4", "joint4", A[3], T[3])]
    qs = [_q(angles[0], angles[1] - angles[0], np.zeros(robot.nv - 2))]
    qs += [_q(tips[k], angles[k], np.zeros(links[k - 2].nv - 3)) for k in (2, 3)]
    return _scenario(key, {"robot": robot, "link3": links[0], "link4": links[1]}, contacts, qs, forces)


def system_4(n_modes=2):
    """System 4: macro/mini four-link robot — flexible 1 m links 1-2 (two-link module), rigid 0.1 m links 3-4
    (mobile one-link modules, 0 modes), joints 3-4 actuated revolute contacts; from rest, fully extended
    along x."""
    return _four_link("4", (1.0, 1.0, 0.1, 0.1), (n_modes, n_modes, 0, 0), (0.0, 0.0, 0.0, 0.0))


def system_5(case="a", n_modes=None):
    """Systems 5a (slow), 5b (fast), 5c (large inertial loading): four flexible 1 m links in series (two-link
    module + two mobile one-link modules). Modes: 2 per link; 5c: 3 on link 1 and 2 on the others (the only
    stable choice in the thesis). From rest: 5a/5b with absolute link angles (0°, 90°, 0°, −90°) (a folded
    pose), 5c fully extended along x ("rotate with all links fully extended")."""
    if case not in ("a", "b", "c"):
        raise ValueError(f"system_5: case must be 'a', 'b' or 'c', got {case!r}")
    modes = n_modes or ((3, 2, 2, 2) if case == "c" else (2, 2, 2, 2))
    angles = (0.0, 0.0, 0.0, 0.0) if case == "c" else (0.0, np.pi / 2, 0.0, -np.pi / 2)
    return _four_link("5" + case, (1.0, 1.0, 1.0, 1.0), modes, angles)


def system_6(case="a", n_modes=2, **kw):
    """Systems 6a/6b: two two-link robots, bases at (0, 0) and (2 L₂, 0), joined at their tips by an
    unpowered planar revolute contact (a closed loop); 6a: links 1 m + 1 m (Table 32), 6b: 1 m + 0.5 m
    (Table 33). From rest with both first links vertical and the second links horizontal, meeting midway."""
    if case not in ("a", "b"):
        raise ValueError(f"system_6: case must be 'a' or 'b', got {case!r}")
    key = "6" + case
    L2 = 1.0 if case == "a" else 0.5
    left = flexible_chain([1.0, L2], n_modes, **kw)
    right = flexible_chain([1.0, L2], n_modes, base=(2 * L2, 0.0, 0.0), **kw)
    A, T = TORQUES[key]
    forces = [motor_torques("left motors", "left", left, A[:2], T[:2]),
              motor_torques("right motors", "right", right, A[2:], T[2:])]
    qs = [_q(np.pi / 2, -np.pi / 2, np.zeros(left.nv - 2)), _q(np.pi / 2, np.pi / 2, np.zeros(right.nv - 2))]
    return _scenario(key, {"left": left, "right": right}, [planar_revolute("tips", ("left", "tip"), ("right", "tip"))],
                     qs, forces)


SYSTEMS = {"1": system_1, "2a": system_2a, "2b": system_2b, "2c": system_2c, "3": system_3, "4": system_4,
           "5a": lambda **kw: system_5("a", **kw), "5b": lambda **kw: system_5("b", **kw),
           "5c": lambda **kw: system_5("c", **kw), "6a": lambda **kw: system_6("a", **kw),
           "6b": lambda **kw: system_6("b", **kw)}


def bonaventura_system(key, **kw):
    """The ready system ``key`` ("1", "2a", "2b", "2c", "3", "4", "5a", "5b", "5c", "6a", "6b")."""
    if key not in SYSTEMS:
        raise KeyError(f"bonaventura_system: unknown system {key!r}; choose from {sorted(SYSTEMS)}")
    return SYSTEMS[key](**kw)
