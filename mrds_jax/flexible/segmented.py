"""The lumped-parameter reference for flexible links: rigid segments joined by rotational springs (the
approach of Working Model 2D, Bonaventura Fig. 27 and Appendix B), built as one of our rigid modules and as
MuJoCo MJCF, so the assumed-modes model (:mod:`.chain`) can be checked against an independent engine.

Discretisation (a Hencky bar chain): a link of length L with ``n`` elements has n rotational springs at the
element midpoints xᵢ = (i − ½) h, h = L / n, each of stiffness k = EI / h (the element's bending compliance
lumped at its middle — the midpoint rule for ½∫EI w''² dx, so a tip-loaded cantilever's deflection
P h Σ (L − xᵢ)² / EI → P L³ / 3EI with an O(h²) error, where Working Model's junction springs k = EI n / L
(Bonaventura eq. 136) at xᵢ = i h converge like O(h) and need the scale factors of Table 34). Between the springs sit
rigid uniform rods: two half elements at the ends and n − 1 whole ones, so mass is distributed exactly as
in the beam (ρ per length, no rotary inertia beyond the rods'). ``n = 0`` is a rigid link. The first rod
of link k is clamped to the motor joint k (the beam's root tangent, as in the assumed-modes model); the
motor between links k − 1 and k sits at link k − 1's tip, after its last rod (θ_kʳ of Bonaventura eq. 130).

The springs are relaxed when straight, like the assumed-modes links. Large rotations are exact in both
segment models, so the comparison also shows where Bernoulli-Euler with second-order kinematics and a
large-deformation segment chain part (the thesis' footnote 33).
"""
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ..model import ModuleBuilder
from ..system.forces import JointTorque


class SegmentLayout(NamedTuple):
    """The rods of a segmented chain, base to tip: ``link`` (which flexible link), ``length``, and the
    joint before each rod: ``motor`` (True for the motor joints) and ``stiffness`` (0 for motors)."""
    link: tuple
    length: tuple
    motor: tuple
    stiffness: tuple
    base: tuple
    rho: tuple
    tip_mass: float


def segment_layout(lengths, n_elements, EI, rho, tip_mass=0.0, base=(0.0, 0.0)):
    """:class:`SegmentLayout` of a fixed-base chain: ``lengths`` per link, ``n_elements`` an int or one per
    link (0 = rigid), ``EI``/``rho`` scalars or per link."""
    n_links = len(lengths)
    ns = [int(n_elements)] * n_links if np.ndim(n_elements) == 0 else [int(n) for n in n_elements]
    EI = np.broadcast_to(np.asarray(EI, dtype=float), (n_links,))
    rho = np.broadcast_to(np.asarray(rho, dtype=float), (n_links,))
    link, length, motor, stiffness = [], [], [], []
    for k, (L, n) in enumerate(zip(lengths, ns)):
        h = L / max(n, 1)
        rods = [L] if n == 0 else [h / 2] + [h] * (n - 1) + [h / 2]
        for i, r in enumerate(rods):
            link.append(k)
            length.append(float(r))
            motor.append(i == 0)
            stiffness.append(0.0 if i == 0 else float(EI[k] / h))
    return SegmentLayout(tuple(link), tuple(length), tuple(motor), tuple(stiffness), tuple(float(b) for b in base),
                         tuple(float(r) for r in rho), float(tip_mass))


def _rod_inertia(m, length):
    return np.diag([1e-9, m * length ** 2 / 12, m * length ** 2 / 12])


def segmented_module(layout):
    """Our rigid planar module of the segmented chain (no gravity), operational point "tip" at the end."""
    b = ModuleBuilder(planar=True, gravity=(0.0, 0.0, 0.0))
    prev = None
    for i, (k, r) in enumerate(zip(layout.link, layout.length)):
        m = layout.rho[k] * r
        position = (layout.base[0], layout.base[1], 0.0) if prev is None else (layout.length[i - 1], 0.0, 0.0)
        b.add_link(f"rod{i}", parent=prev, joint="revolute", position=position, mass=m, com=(r / 2, 0.0, 0.0),
                   inertia=_rod_inertia(m, r))
        prev = f"rod{i}"
    if layout.tip_mass > 0:
        b.add_link("tip_mass", parent=prev, joint="fixed", position=(layout.length[-1], 0.0, 0.0),
                   mass=layout.tip_mass, inertia=np.eye(3) * 1e-12)
    b.add_frame("tip", prev, position=(layout.length[-1], 0.0, 0.0))
    return b.build()


def motor_joints(layout):
    """Indices of the motor joints in q (one per link)."""
    return tuple(i for i, m in enumerate(layout.motor) if m)


def _spring_and_motor_torques(t, q, v, params):
    A, T, B, K = params
    return (A * jnp.sin(2.0 * jnp.pi * t / T)) @ B - K * q


def segmented_torques(name, module_name, layout, amplitudes, periods):
    """Joint forces of the segmented chain: motors τᵢ = Aᵢ sin(2π t / Tᵢ) (Bonaventura eq. 134) on the motor joints and
    the springs' −k q on the others (a :class:`~mrds_jax.system.forces.JointTorque`)."""
    motors = motor_joints(layout)
    B = np.zeros((len(motors), len(layout.link)))
    B[np.arange(len(motors)), motors] = 1.0
    A = jnp.asarray(amplitudes, dtype=float)
    T = jnp.broadcast_to(jnp.asarray(periods, dtype=float), A.shape)
    return JointTorque(params=(A, T, jnp.asarray(B), jnp.asarray(layout.stiffness)), name=name,
                       module=module_name, fn=_spring_and_motor_torques)


def initial_joint_angles(layout, link_angles):
    """q of the straight segmented chain whose links have the absolute root angles ``link_angles``."""
    rel = np.diff(np.concatenate([[0.0], np.asarray(link_angles, dtype=float)]))
    q = np.zeros(len(layout.link))
    q[list(motor_joints(layout))] = rel
    return q


def segmented_outputs(layout, q):
    """The thesis' outputs of the segmented chain at joint angles q (any leading batch axes): the absolute
    root angles of the links, the tip position (2,) and each link's transverse tip deflection w̄ (the tip's
    offset from the root tangent line, the assumed-modes model's definition)."""
    q = np.asarray(q, dtype=float)
    ang = np.cumsum(q, axis=-1)
    L = np.asarray(layout.length)
    steps = np.stack([L * np.cos(ang), L * np.sin(ang)], axis=-1)
    ends = np.asarray(layout.base) + np.cumsum(steps, axis=-2)
    starts = np.concatenate([np.broadcast_to(np.asarray(layout.base), ends[..., :1, :].shape), ends[..., :-1, :]],
                            axis=-2)
    link = np.asarray(layout.link)
    roots = [int(np.flatnonzero(link == k)[0]) for k in range(link.max() + 1)]
    lasts = [int(np.flatnonzero(link == k)[-1]) for k in range(link.max() + 1)]
    phi = ang[..., roots]
    d = ends[..., lasts, :] - starts[..., roots, :]
    defl = -np.sin(phi) * d[..., 0] + np.cos(phi) * d[..., 1]
    return phi, ends[..., -1, :], defl


# ----------------------------------------------------------------------------- MuJoCo
def _mjcf_chain(prefix, layout):
    """Nested MJCF bodies of one segmented chain (hinges about z) and its motor actuators."""
    body, close = [], []
    for i, (k, r) in enumerate(zip(layout.link, layout.length)):
        m = layout.rho[k] * r
        pos = f"{layout.base[0]!r} {layout.base[1]!r} 0" if i == 0 else f"{layout.length[i - 1]!r} 0 0"
        I = m * r ** 2 / 12
        stiff = "" if layout.motor[i] else f' stiffness="{layout.stiffness[i]!r}"'
        body.append(f'<body name="{prefix}rod{i}" pos="{pos}">'
                    f'<joint name="{prefix}j{i}" type="hinge" axis="0 0 1"{stiff}/>'
                    f'<inertial pos="{r / 2!r} 0 0" mass="{m!r}" diaginertia="1e-9 {I!r} {I!r}"/>')
        close.append("</body>")
    last = layout.length[-1]
    extra = f'<site name="{prefix}tip" pos="{last!r} 0 0"/>'
    if layout.tip_mass > 0:
        extra += (f'<body name="{prefix}tip_mass" pos="{last!r} 0 0"><inertial pos="0 0 0" '
                  f'mass="{layout.tip_mass!r}" diaginertia="1e-12 1e-12 1e-12"/></body>')
    motors = "".join(f'<motor name="{prefix}m{n}" joint="{prefix}j{i}" gear="1"/>'
                     for n, i in enumerate(motor_joints(layout)))
    return "".join(body) + extra + "".join(close), motors


def segmented_mjcf(chains, slider_y=None, connect_tips=False, timestep=1e-4, solref=(0.002, 1.0)):
    """MJCF of one or two segmented chains (``chains``: {prefix: layout}), planar (hinges about z, no gravity,
    no contacts), RK4. ``slider_y``: the tip of the (single) chain slides along x at that height (System 2c:
    a slider body on a slide joint, tip and slider sites connected); ``connect_tips``: the two chains' tips
    joined (System 6: sites connected). MuJoCo's equality constraints are soft (``solref``)."""
    bodies, motors, extra_bodies, eq = [], [], "", ""
    for prefix, layout in chains.items():
        b, m = _mjcf_chain(prefix, layout)
        bodies.append(b)
        motors.append(m)
    prefixes = list(chains)
    sr = f'solref="{solref[0]!r} {solref[1]!r}"'
    if slider_y is not None:
        extra_bodies = (f'<body name="slider" pos="0 {slider_y!r} 0"><joint name="slide" type="slide" axis="1 0 0"/>'
                        f'<inertial pos="0 0 0" mass="1e-6" diaginertia="1e-12 1e-12 1e-12"/>'
                        f'<site name="slider" pos="0 0 0"/></body>')
        eq = f'<equality><connect site1="{prefixes[0]}tip" site2="slider" {sr}/></equality>'
    if connect_tips:
        eq = f'<equality><connect site1="{prefixes[0]}tip" site2="{prefixes[1]}tip" {sr}/></equality>'
    return (f'<mujoco model="segmented"><option timestep="{timestep!r}" gravity="0 0 0" integrator="RK4">'
            f'<flag contact="disable"/></option><worldbody>{"".join(bodies)}{extra_bodies}</worldbody>'
            f'{eq}<actuator>{"".join(motors)}</actuator></mujoco>')
