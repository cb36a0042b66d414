"""A planar test rig for Whitney's analysis (docs/guide/assembly.md): a rigid peg (:mod:`.peg_hole`'s capsule) on a
chain x, z, θ — two massless slides and a revolute about the peg's tip — in a slot, pushed by a *support* whose
generalised force is Q = F₀ + t F₁ − K (q − q_ref) − D (v − v_ref).

With q = (x_E, z_E, θ) the generalised forces are the applied lateral force, the world z force and the moment about
the tip (counter-clockwise in the x–z plane: the revolute turns about −y), exactly the wrench of
:mod:`.whitney`'s diagrams; the support is a remote-centre compliance with its centre at the tip, a force-controlled
axis where K = D = 0, a velocity-controlled one where D > 0 and v_ref is the commanded speed. Every number of the
support is traced: a batch of loads runs in one compiled rollout (:func:`rig_rollouts`).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ... import system as S
from ...model import ModuleBuilder
from ...system.forces import joint_torque
from ...system.ncp import NCPSettings
from ...system.timestepping import ContactSettings, contact_rollout
from .peg_hole import HoleLayout, PegHole, peg_hole_geoms
from .whitney import two_point_contact


class Support(NamedTuple):
    """Q = force + t ramp − stiffness (q − reference) − damping (v − velocity), each (3,) over (x_E, z_E, θ)."""
    force: jax.Array
    ramp: jax.Array
    stiffness: jax.Array
    reference: jax.Array
    damping: jax.Array
    velocity: jax.Array


def support(force=(0.0, 0.0, 0.0), ramp=(0.0, 0.0, 0.0), stiffness=(0.0, 0.0, 0.0), reference=(0.0, 0.0, 0.0),
            damping=(0.0, 0.0, 0.0), velocity=(0.0, 0.0, 0.0)):
    """A :class:`Support` of float arrays (zeros where not given)."""
    return Support(*(jnp.asarray(x, float) for x in (force, ramp, stiffness, reference, damping, velocity)))


def support_law(t, q, v, s):
    """The support's generalised force (3,) at time t and state (q, v)."""
    return s.force + t * s.ramp - s.stiffness * (q - s.reference) - s.damping * (v - s.velocity)


class Rig(NamedTuple):
    """The peg's inertia: ``mass`` (kg), its centre of mass at ``com`` along the axis from the tip (m), ``inertia``
    about the centre of mass (kg m²)."""
    mass: float = 0.01
    com: float = 0.03
    inertia: float = 3e-6


def peg_module(rig=Rig()):
    """The chain x, z (massless slides), θ (revolute about −y at the tip, operational point "tip"); no gravity."""
    b = ModuleBuilder(gravity=(0.0, 0.0, 0.0))
    b.add_link("sx", None, "prismatic", axis=(1, 0, 0), mass=0.0, inertia=np.zeros((3, 3)))
    b.add_link("sz", "sx", "prismatic", axis=(0, 0, 1), mass=0.0, inertia=np.zeros((3, 3)))
    b.add_link("peg", "sz", "revolute", axis=(0, -1, 0), mass=rig.mass, com=(0.0, 0.0, rig.com),
               inertia=np.diag([rig.inertia, rig.inertia, 1e-3 * rig.inertia]))
    b.add_frame("tip", "peg")
    return b.build()


def rig_system(p=PegHole(), rig=Rig(), layout=HoleLayout()):
    """The rig's system: the peg module "peg" and the hole of ``p`` (a slot by default) at the origin."""
    return S.build_system({"peg": peg_module(rig)}, [], collision=peg_hole_geoms(p, "peg", "tip", layout))


def two_point_configuration(p, theta):
    """q = (x_E, z_E, θ) of the two-point contact at tilt θ > 0 (:func:`~.whitney.two_point_contact`)."""
    g = two_point_contact(p.peg_radius, p.clearance, theta)
    return jnp.stack([g.tip[0], g.tip[1], jnp.asarray(theta, float)])


def rig_rollout(system, q0, s, dt, n_steps, decimation, settings=ContactSettings()):
    """One run of the rig from rest at q0 under the support ``s``."""
    force = joint_torque("support", "peg", support_law, s)
    return contact_rollout(system, (q0,), (jnp.zeros(3, q0.dtype),), dt, n_steps, decimation, forces=(force,),
                           settings=settings)


def rig_rollouts(system, q0, supports, dt, n_steps, decimation, settings=ContactSettings()):
    """A batch of runs (q0 (n, 3), supports of (n, 3) arrays) in one compiled program."""
    run = jax.vmap(lambda q, s: rig_rollout(system, q, s, dt, n_steps, decimation, settings))
    return jax.jit(run)(q0, supports)


def wall_forces(system, traj, walls=("hole_mx", "hole_px")):
    """(n_out, len(walls), 3) world force on the peg by each wall geom, summed over its slots (the trajectory's
    contact_forces are on geom 2, the wall, by geom 1, the peg)."""
    F = -np.asarray(traj.contact_forces(system))
    pair = np.asarray(system.collision.slot_pair)
    names = system.collision.pair_names()
    return np.stack([F[:, pair == names.index(("peg", w))].sum(axis=1) for w in walls], axis=1)


# the jamming diagram's runs keep ADMM (at most 4 × 50 iterations a step): under the Newton default a jammed peg
# creeps 3.1-3.4e-9 m in 10 ms, where tests/test_assembly_whitney.py bounds the creep at 3e-9 and ADMM meets it
# (issue 58, open)
GRID_SETTINGS = ContactSettings(ncp=NCPSettings(stages=4, iterations=50, method="admm"))


def jamming_grid(system, p, theta, a, b, insertion=1e-2, duration=0.01, dt=1e-3, settings=GRID_SETTINGS):
    """The jamming diagram simulated (docs/guide/assembly.md §4): from rest in the two-point contact at tilt θ, a
    constant applied wrench (F_x, F_z, M) = F_z (a, 1, b r) (F_z = ``insertion``) at every point of ``a``, ``b``
    (equal-length arrays), for ``duration``. Returns (largest |q − q₀| over the run (n,), the trajectory of the
    batch, stored at its start and end). The default solver settings cap a step at 4 × 50 ADMM iterations: a
    jammed peg's step is solved exactly by the warm start's polish, a moving one need not be exact to move."""
    a, b = jnp.asarray(a, float), jnp.asarray(b, float)
    n = a.shape[0]
    zeros = jnp.zeros((n, 3))
    force = jnp.stack([a * insertion, -insertion * jnp.ones_like(a), b * p.peg_radius * insertion], axis=1)
    supports = Support(force, zeros, zeros, zeros, zeros, zeros)
    q0 = jnp.broadcast_to(two_point_configuration(p, theta), (n, 3))
    steps = int(round(duration / dt))
    traj = rig_rollouts(system, q0, supports, dt, steps, steps, settings)
    return np.abs(np.asarray(traj.q[0]) - np.asarray(q0)[:, None]).max(axis=(1, 2)), traj
