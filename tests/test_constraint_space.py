"""Table 17's constraint-space matrix and the constraint solve's fast path.

* Bᶜ built from contact-pair blocks (Bonaventura Table 17, eq. 88; ``system.constraint_space``) equals the
  constraint Jacobian route Σₖ Jₖ Hₖ⁻¹ Jₖᵀ (eq. 109-111: J by forward-mode differentiation of the contacts'
  velocity errors, H by CRBA, solved by numpy), on a planar one-module four-bar closed by a Type B contact,
  the dual-arm grasp (two Type A welds on a free box) and the CKCM Stewart platform (six spherical contacts
  sharing one platform), at random configurations (float64, 1e-10 relative); and ``constraint_system``'s Bᶜ, summed
  from each module's Dᵀ Λ⁻¹ D along its constraint directions only, equals Table 17's ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ
  formed densely in the test (Aₖ from the sides' operators, Λₖ⁻¹ = Jₖ Hₖ⁻¹ Jₖᵀ); a rigid tree's own
  ``module_terms_along`` equals the generic one.
* The pseudo-inverse solve's batched fast path (a plain Cholesky where it shows full numerical rank, the
  pivoted pseudo-inverse only for the scenarios that need it): in a batch mixing regular, nearly singular and
  exactly singular matrices, every lane equals the same matrix solved alone, regular lanes equal numpy's
  solve and singular ones numpy's minimum-norm least squares; gradients equal central differences.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.dynamics.interface import mass_matrix
from mrds_jax.examples import dual_arm_grasp
from mrds_jax.model import ModuleBuilder
from mrds_jax.spatial.dense import psd_pinv_solve
from mrds_jax.system.stabilisation import constraint_jacobian

jax.config.update("jax_enable_x64", True)


def jacobian_route(system, state):
    """Σₖ Jₖ Hₖ⁻¹ Jₖᵀ with J the constraint Jacobian (eq. 109-111), in numpy."""
    J = np.asarray(constraint_jacobian(system, state))
    out, s = np.zeros((J.shape[0], J.shape[0])), 0
    for m, q in zip(system.modules, state.q):
        Jk = J[:, s:s + m.nv]
        s += m.nv
        out += Jk @ np.linalg.solve(np.asarray(mass_matrix(m, q)), Jk.T)
    return out


def planar_fourbar():
    b = ModuleBuilder(planar=True)
    for name, parent, pos, length, mass in (("k1", None, (0, 0, 0), 0.4, 0.8), ("k2", "k1", (0.4, 0, 0), 1.1, 1.5),
                                            ("k4", None, (1.0, 0, 0), 0.7, 1.1)):
        b.add_link(name, parent=parent, joint="revolute", position=pos, mass=mass, com=(0.5 * length, 0.02, 0.0),
                   inertia=np.diag([0.01, 0.02, 0.03]))
    b.add_frame("c1", "k2", position=(1.1, 0, 0))
    b.add_frame("c2", "k4", position=(0.7, 0, 0))
    system = S.build_system({"bar": b.build()}, [C.planar_revolute("loop", ("bar", "c1"), ("bar", "c2"))])
    return system, S.SystemState((jnp.asarray([0.3, 1.2, 1.9]),), (jnp.zeros(3),))


def stewart():
    from mrds_jax.ckcm import multibody as MB
    from mrds_jax.ckcm.kinematics import home_pose
    from mrds_jax.ckcm.params import nominal
    params = nominal()
    return MB.build_ckcm_system(params), MB.state_from_pose(params, home_pose(params), jnp.zeros(6))


def perturbed(system, state, rng, scale=0.2):
    """Random configurations near ``state``: joint angles of fixed-base modules moved, free bodies kept."""
    q = tuple(qk if m.nq != m.nv else qk + scale * jnp.asarray(rng.standard_normal(qk.shape))
              for m, qk in zip(system.modules, state.q))
    return S.SystemState(q, state.v)


@pytest.mark.parametrize("make", [planar_fourbar, dual_arm_grasp, stewart], ids=["fourbar_typeB", "dual_arm", "stewart"])
def test_table17_blocks_equal_constraint_jacobian_route(make):
    system, state = make()
    types = {system.connectivity.contact_type(i) for i in range(len(system.contacts))}
    assert types == ({"B"} if make is planar_fourbar else {"A"})
    f = jax.jit(lambda s: S.constraint_matrix(system, s))
    rng = np.random.default_rng(7)
    for _ in range(4):
        s = perturbed(system, state, rng)
        Bc = np.asarray(f(s))
        ref = jacobian_route(system, s)
        assert Bc.shape == ref.shape == (system.connectivity.n_constraints,) * 2
        assert np.abs(Bc - ref).max() <= 1e-10 * np.abs(ref).max()
        assert np.abs(Bc - Bc.T).max() <= 1e-12 * np.abs(ref).max()



def table17_formed(system, state, cs):
    """ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ (Table 17, eq. 88) formed densely in numpy: Aₖ[i, s] the sum of the operators Tₐ
    (``cs.T``) of contact i's sides at point s of module k, Λₖ⁻¹ = Jₖ Hₖ⁻¹ Jₖᵀ from the points' task Jacobian of
    the module's full Step 2 terms and its mass matrix, ψᶜ block-diagonal over the contacts."""
    from mrds_jax.dynamics.interface import module_terms
    conn = system.connectivity
    d, n_contacts = conn.dim, len(system.contacts)
    B = np.zeros((n_contacts * d, n_contacts * d))
    for k, pts in enumerate(conn.points):
        if not pts:
            continue
        module, q, v = system.modules[k], state.q[k], state.v[k]
        J = np.asarray(module_terms(module, q, v, jnp.zeros(module.nv), pts).J)
        A = np.zeros((n_contacts * d, len(pts) * d))
        for i, (mE, sE, mP, sP) in enumerate(conn.sides):
            on_modules = [(m, slot) for m, slot in ((mE, sE), (mP, sP)) if m >= 0]
            for (m, slot), T in zip(on_modules, cs.T[i]):
                if m == k:
                    A[i * d:(i + 1) * d, slot * d:(slot + 1) * d] += np.asarray(T)
        B += A @ J @ np.linalg.solve(np.asarray(mass_matrix(module, q)), J.T) @ A.T
    psi_c = np.zeros((n_contacts * d, conn.n_constraints))
    for i, (m, cols) in enumerate(zip(cs.modes, conn.constraint_slices())):
        psi_c[i * d:(i + 1) * d, cols] = np.asarray(m.psi_c)
    return psi_c.T @ B @ psi_c


@pytest.mark.parametrize("make", [planar_fourbar, dual_arm_grasp, stewart], ids=["fourbar_typeB", "dual_arm", "stewart"])
def test_constraint_system_matrix_equals_table17_formed_in_the_test(make):
    """``constraint_system``'s Bᶜ, summed from each module's Dᵀ Λ⁻¹ D along its constraint directions only, equals
    Table 17's ψᶜᵀ (Σₖ Aₖ Λₖ⁻¹ Aₖᵀ) ψᶜ formed densely here (Type B contact on one module, two Type A welds on a
    free box, six spherical contacts sharing one platform); and the Lilly & Orin operator Λ⁻¹ x, in factored form
    J (Ψ x) where that is cheaper, equals the formed Λ⁻¹ x."""
    from mrds_jax.dynamics.interface import module_terms
    from mrds_jax.system import lilly
    system, state = make()
    s = perturbed(system, state, np.random.default_rng(11))
    cs = S.constraint_system(system, s)
    formed = table17_formed(system, s, cs)
    scale = np.abs(formed).max()
    assert formed.shape == (system.connectivity.n_constraints,) * 2 and scale > 0
    np.testing.assert_allclose(np.asarray(cs.Bc), formed, rtol=0, atol=1e-12 * scale)
    terms = [module_terms(m, q, v, jnp.zeros(m.nv), pts) if pts else None
             for m, q, v, pts in zip(system.modules, s.q, s.v, system.connectivity.points)]
    assert any(t is not None and lilly._factored(t, 0, 0) for t in terms)     # the factored route is exercised
    for t in terms:
        if t is not None:
            x = jnp.asarray(np.random.default_rng(2).standard_normal((t.Psi.shape[1], 3)))
            np.testing.assert_allclose(np.asarray(lilly.operational_inverse_inertia_times(t, x)),
                                       np.asarray(t.Lam_inv @ x), rtol=0, atol=1e-12 * np.abs(t.Lam_inv @ x).max())


@pytest.mark.parametrize("make", [planar_fourbar, dual_arm_grasp], ids=["fourbar_typeB", "dual_arm"])
def test_terms_along_directions_equal_the_full_terms_projected(make):
    """``module_terms_along`` — the rigid tree's own form on each recursion (ground coordinates: one solve for the
    c columns; unrolled: block by block) and the generic block-by-block form — equals U = Ψ D and K = Dᵀ Λ⁻¹ D
    from the full Step 2 terms and the dense D, for random directions with two blocks sharing columns."""
    from mrds_jax.dynamics import interface
    system, state = make()
    s = perturbed(system, state, np.random.default_rng(5))
    conn = system.connectivity
    generic = interface.module_terms_along.dispatch(object)
    rng = np.random.default_rng(3)
    for k, pts in enumerate(conn.points):
        if not pts:
            continue
        d, n = conn.dim, len(pts)
        slots = [0, n - 1, 0] if n > 1 else [0, 0, 0]
        blocks = [jnp.asarray(rng.standard_normal((d, w))) for w in (2, 3, 2)]
        D = interface.Directions(blocks, slots, [0, 2, 0], 5)                 # blocks 0 and 2 share columns 0:2
        tau = jnp.asarray(rng.standard_normal(system.modules[k].nv))
        for recursion in ("unrolled", "level_scan"):
            m = system.modules[k].with_recursion(recursion)
            full = jax.jit(lambda q, v: interface.module_terms(m, q, v, tau, pts))(s.q[k], s.v[k])
            Dd = np.asarray(D.dense(n, d))
            ref = dict(qdd_open=full.qdd_open, xdd_open=full.xdd_open, U=np.asarray(full.Psi) @ Dd,
                       K=Dd.T @ np.asarray(full.Lam_inv) @ Dd)
            for label, f in (("own", interface.module_terms_along), ("generic", generic)):
                got = jax.jit(lambda q, v, f=f: f(m, q, v, tau, pts, D))(s.q[k], s.v[k])
                for name, b in ref.items():
                    a, b = np.asarray(getattr(got, name)), np.asarray(b)
                    np.testing.assert_allclose(a, b, rtol=0, atol=1e-11 * max(1.0, np.abs(b).max()),
                                               err_msg=f"{label} {recursion} {name}")


def psd_batch(rng, n=8):
    """Regular, nearly singular (one eigenvalue 1e-13 of the largest) and exactly rank-deficient PSD
    matrices, with right-hand sides in their range (consistent)."""
    mats, rhs = [], []
    for rank in (n, n, n - 1, n - 3, n, 0):
        X = rng.standard_normal((n, rank))
        B = X @ X.T
        if rank == n and len(mats) == 1:
            w, V = np.linalg.eigh(B)
            B = (V * np.concatenate([[1e-13 * w[-1]], w[1:]])) @ V.T
        mats.append(B)
        rhs.append(B @ rng.standard_normal(n))
    return np.stack(mats), np.stack(rhs)


def test_pinv_fast_path_lanes_equal_single_solves_and_numpy():
    rng = np.random.default_rng(3)
    B, y = psd_batch(rng)
    cut = 1e-9
    batched = jax.jit(jax.vmap(lambda b, v: psd_pinv_solve(b, v, cut)))
    single = jax.jit(lambda b, v: psd_pinv_solve(b, v, cut))
    x, rank, _, _ = batched(jnp.asarray(B), jnp.asarray(y))
    expected_rank = [8, 7, 7, 5, 8, 0]
    assert [int(r) for r in rank] == expected_rank
    for b in range(len(B)):
        xs, rs, _, _ = single(jnp.asarray(B[b]), jnp.asarray(y[b]))
        assert int(rs) == expected_rank[b]
        np.testing.assert_allclose(np.asarray(x[b]), np.asarray(xs), rtol=0, atol=1e-11 * max(1, np.abs(xs).max()))
        ref = np.linalg.lstsq(B[b], y[b], rcond=None)[0] if expected_rank[b] < 8 else np.linalg.solve(B[b], y[b])
        if b != 1:   # the nearly singular lane: its dropped direction makes it differ from the exact solve
            np.testing.assert_allclose(np.asarray(x[b]), ref, rtol=0, atol=1e-8 * max(1, np.abs(ref).max()))
    # a batch of regular matrices only (the fast path alone) gives the same lanes
    regular = [0, 4]
    x_reg = batched(jnp.asarray(B[regular]), jnp.asarray(y[regular]))[0]
    np.testing.assert_allclose(np.asarray(x_reg), np.asarray(x)[regular], rtol=0, atol=1e-12)


def test_pinv_fast_path_gradients_equal_central_differences():
    rng = np.random.default_rng(5)
    B, y = psd_batch(rng, n=5)
    dB = rng.standard_normal(B.shape)
    dB = dB + dB.transpose(0, 2, 1)
    keep = [0, 2, 3, 4]      # regular and exactly rank-deficient lanes (the rank is constant along the line)

    def objective(t):
        x = jax.vmap(lambda b, v: psd_pinv_solve(b, v, 1e-9)[0])(jnp.asarray(B[keep]) + t * jnp.asarray(dB[keep])
                                                                    * (np.arange(len(keep)) < 1)[:, None, None],
                                                                    jnp.asarray(y[keep]))
        return jnp.sum(jnp.sin(x))

    g = jax.grad(objective)(0.0)
    h = 1e-6
    fd = (objective(h) - objective(-h)) / (2 * h)
    assert abs(float(g) - float(fd)) <= 1e-6 * max(1.0, abs(float(fd)))
    gy = jax.grad(lambda v: jnp.sum(jnp.sin(jax.vmap(lambda b, w: psd_pinv_solve(b, w, 1e-9)[0])(jnp.asarray(B[keep]), v))))(
        jnp.asarray(y[keep]))
    e = np.zeros_like(y[keep]); e[2, 1] = 1.0
    f = lambda v: float(jnp.sum(jnp.sin(jax.vmap(lambda b, w: psd_pinv_solve(b, w, 1e-9)[0])(jnp.asarray(B[keep]), v))))  # noqa: E731
    fd_y = (f(jnp.asarray(y[keep] + h * e)) - f(jnp.asarray(y[keep] - h * e))) / (2 * h)
    assert abs(float(gy[2, 1]) - fd_y) <= 1e-6 * max(1.0, abs(fd_y))
