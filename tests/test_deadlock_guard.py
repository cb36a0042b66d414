"""jax/jaxlib 0.10.x can deadlock in batched LAPACK calls inside jit(vmap) on 2-core CPUs (both threads of
XLA's intra-op pool wait on sub-tasks queued on the same pool; ../shared/bench/jax_cpu_deadlock_repro.py; seen
with Cholesky, SVD, eigh and lstsq, a race that shows up in some runs of a few hundred to a few thousand
calls). Our vmapped paths therefore lower to no LAPACK call: the physics step (spatial.linalg) and the CKCM /
inverse-dynamics paths (spatial.dense), and the narrow phase's convex route (collision.convex: its 2x2
eigenproblems in closed form; with jnp.linalg.eigh there, jit(vmap) of a convex pair at batch 1024 hung in
lapack_dsyevd_ffi, both pool threads waiting in ParallelBatchMap). This file checks, for each of those paths, that
the lowered vmapped program has no LAPACK custom call, and runs the physics and CKCM ones at batch 1024 in a child
process with a timeout, so a regression fails instead of hanging CI.

Not covered (they keep LAPACK; not vmapped by the library): system.project_positions / project_velocities
(``lstsq`` with a rank cut-off) and system.solve's eigh-based solver option."""
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

from mrds_jax.ckcm import kinematics as K
from mrds_jax.ckcm import lagrangian as L
from mrds_jax.ckcm import multibody as MB
from mrds_jax.ckcm.params import nominal
from mrds_jax.collision.narrowphase import convex_pair

LAPACK = re.compile(r"custom_call\s*@\w*(lapack|cusolver|hipsolver|potrf|getrf|trsm|syevd|gesdd|gesvd|geqrf)",
                    re.IGNORECASE)


def batched_paths(batch):
    """name -> (jit(vmap(f)), batched arguments) for every vmapped path that used to call LAPACK."""
    params = nominal()
    pose0 = K.home_pose(params)
    offsets = 0.01 * jnp.sin(jnp.arange(batch)[:, None] * jnp.arange(1, 7)[None, :] * 0.37)
    poses = pose0 + offsets
    rates = jnp.cos(offsets)
    accs = jnp.sin(2 * offsets)
    lengths = jax.vmap(lambda p: K.inverse_kinematics(params, p))(poses)
    states = jax.vmap(lambda p, r: MB.state_from_pose(params, p, r))(poses, rates)
    path = MB.ellipse(params, 0.5)
    ctl = MB.computed_torque()
    system = MB.build_ckcm_system(params)
    return {
        "forward kinematics (Newton solve) and cond(C) (Jacobi)":
            (jax.vmap(lambda l: K.newton_forward_kinematics(params, l)), (lengths,)),
        "FK gradient (implicit solve)":
            (jax.vmap(jax.grad(lambda l: jnp.sum(K.newton_forward_kinematics(params, l).pose))), (lengths,)),
        "Lagrangian actuator forces (C^-T solve)":
            (jax.vmap(lambda q, qd, qdd: L.actuator_forces(params, q, qd, qdd).total), (poses, rates, accs)),
        "multibody inverse dynamics (system.inverse_dynamics)":
            (jax.vmap(lambda q, qd, qdd: MB.inverse_dynamics_at(params, q, qd, qdd).tau_actuated),
             (poses, rates, accs)),
        "computed-torque controller (pose_from_state, C^-T solve)":
            (jax.vmap(lambda s, t: MB.tracking_forces(system, params, s, t, path, ctl)),
             (states, jnp.linspace(0.0, 0.5, batch))),
    }


@pytest.mark.parametrize("name", list(batched_paths(4)))
def test_vmapped_path_has_no_lapack_call(name):
    f, args = batched_paths(8)[name]
    assert LAPACK.search(jax.jit(f).lower(*args).as_text()) is None, name


@pytest.mark.parametrize("kinds", [("cylinder", "capsule"), ("box", "ellipsoid")], ids="-".join)
def test_vmapped_convex_pair_has_no_lapack_call(kinds):
    """GJK, EPA, the normal's Newton refinement and the witness points of a convex pair (narrowphase.convex_pair),
    vmapped as the narrow phase runs them."""
    batch = 4
    rotations = jnp.broadcast_to(jnp.eye(3), (batch, 3, 3))
    positions = jnp.zeros((batch, 3)).at[:, 0].set(jnp.linspace(0.0, 0.3, batch))
    sizes = jnp.full((batch, 3), 0.1)
    f = jax.vmap(convex_pair(*kinds))
    assert LAPACK.search(jax.jit(f).lower(rotations, 0 * positions, sizes, rotations, positions, sizes).as_text()) \
        is None, kinds


def test_the_check_sees_a_lapack_call():
    a = jnp.eye(6) + jnp.zeros((4, 6, 6))
    assert LAPACK.search(jax.jit(jax.vmap(jnp.linalg.svd)).lower(a).as_text())


CHILD = r"""
import sys; sys.path.insert(0, "tests")
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
from test_deadlock_guard import batched_paths
from test_engine_step import stewart_step
step, state = stewart_step(jnp.float64, "auto")
fs = dict(batched_paths(1024))
fs["Stewart step"] = (jax.vmap(step), (jax.tree.map(lambda x: jnp.broadcast_to(x, (1024,) + x.shape), state),))
for name, (f, args) in fs.items():
    f = jax.jit(f)
    for _ in range(5):
        out = jax.block_until_ready(f(*args))
    assert all(bool(jnp.isfinite(x).all()) for x in jax.tree.leaves(out)), name
    print("ok", name, flush=True)
print("done", jax.__version__)
"""


def test_batched_paths_do_not_hang():
    """Every path above and our Stewart step at batch 1024 in a child process with a timeout."""
    try:
        out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"batched paths hung; finished before the hang:\n{e.stdout}") from None
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    assert "done" in out.stdout
