"""Tree recursions whose traced program does not grow with the number of links: one ``jax.lax.scan`` over
depth levels (the idea behind MuJoCo MJX's ``scan.body_tree``).

Every textbook recursion over a rigid tree is one of two sweeps (Featherstone §5.3, Tables 5.1, 6.2, 7.1):

* **outward** (root → leaves): each link's value is a function of its parent's value and its own data,
  xᵢ = f(x_λ(i), dᵢ) — placements ⁰Tᵢ = ⁰T_λ(i) ᶦ⁻¹Tᵢ, twists vᵢ = ᶦX_λ vλ + Sᵢ q̇ᵢ, accelerations;
* **inward** (leaves → root): each link combines its own data with the sum of what its children hand it,
  (yᵢ, hᵢ) = g(Σ_{c: λ(c)=i} h_c, dᵢ), and hands hᵢ to its parent — composite inertias Iᶜ, RNEA forces,
  ABA's articulated inertias Iᴬ and bias forces pᴬ.

Links at the same depth never depend on each other, so a sweep can process a whole depth level at once.
The static :class:`~mrds_jax.model.tree.LevelSchedule` lays the links out as (levels L) x (slots W); one
``lax.scan`` over the L levels applies f (or g) ``vmap``-ped over the W slots of a level. The scan's carry is
the previous level's values (outward: the parents, gathered by ``parent_slot``; inward: the hand-offs of the
next-deeper level, summed over ``child_slots``). The traced program therefore holds one copy of f or g
whatever the size of the tree, and the sweep takes L sequential steps instead of n (L = n for a serial
chain, 15 instead of 101 for tiago_dual).

``Topology.recursion`` picks the route: ``"unrolled"`` (a Python loop over links, traced link by link:
fastest per call for small modules, compile time growing with n), ``"level_scan"``, or ``"auto"``: the level
scan from :data:`LEVEL_SCAN_MIN_LINKS` links on (measured: ``experiments/bench_tree.py``, ``experiments/out/bench_compile.md``),
and from :data:`LOOP_LEVEL_SCAN_MIN_LINKS` links on for a module that carries contact points of a system
(:func:`loop_recursion`, applied by ``build_system``): there every tree sweep is traced again per Step 2 term
(Ψ's columns, the points' Jacobians), so the unrolled route's compile time multiplies (the 15-link four-bar biped:
17-20 s to compile with the level scan against 40-68 s unrolled, and 426-483 µs against 555-677 µs per call;
``experiments/out/biped_timing.md``).

Both routes run the *same* per-link step: :func:`outward` and :func:`inward` take the link data either
stacked ((n, ...) arrays, motion subspaces padded to a common width: the level scan) or as a list with one
entry per link (exact shapes: the unrolled route, a Python loop that calls the step link by link). So each
textbook algorithm writes its per-link formulas once, as the step, with the paper's equation in its
docstring (``aba.py``, ``kinematics.py``, ``crba.py``, ``rnea.py``).
"""
import jax
import jax.numpy as jnp

from ..model.tree import level_schedule

LEVEL_SCAN_MIN_LINKS = 24
LOOP_LEVEL_SCAN_MIN_LINKS = 12


def uses_level_scan(topology):
    """Whether the dynamics of a module with this topology run as level scans (``Topology.recursion``)."""
    if topology.recursion == "auto":
        return topology.n_links >= LEVEL_SCAN_MIN_LINKS
    if topology.recursion in ("unrolled", "level_scan"):
        return topology.recursion == "level_scan"
    raise ValueError(f"unknown recursion {topology.recursion!r}; use 'auto', 'unrolled' or 'level_scan'")


def loop_recursion(module, n_points):
    """``module`` with ``recursion="level_scan"`` when it is a tree module on ``"auto"`` that carries ``n_points`` > 0
    contact points and has at least :data:`LOOP_LEVEL_SCAN_MIN_LINKS` links (module docstring); else ``module``."""
    topology = getattr(module, "topology", None)
    if (n_points and getattr(topology, "recursion", None) == "auto" and hasattr(module, "with_recursion")
            and LOOP_LEVEL_SCAN_MIN_LINKS <= topology.n_links < LEVEL_SCAN_MIN_LINKS):
        return module.with_recursion("level_scan")
    return module


def _by_level(schedule, per_link):
    """Per-link arrays (n, ...) laid out per level and slot, (L, W, ...)."""
    return jax.tree.map(lambda a: a[schedule.slots], per_link)


def _by_link(schedule, per_level):
    """Inverse of :func:`_by_level`: (L, W, ...) back to link order (n, ...)."""
    flat = schedule.n_levels * schedule.width
    return jax.tree.map(lambda y: y.reshape((flat,) + y.shape[2:])[schedule.link_position], per_level)


def outward(topology, step, support_value, per_link):
    """Outward sweep xᵢ = step(x_λ(i), dᵢ) for every link, parents before children.

    ``step(parent_value, link_data) -> (value, output)`` works on one link; ``support_value`` is the value the
    root links see as their parent's; ``per_link`` a pytree of (n, ...) arrays (level scan; returns
    (values, outputs) of every link, stacked (n, ...)) or a list of n per-link data (unrolled; returns two
    lists)."""
    if isinstance(per_link, list):
        values, outputs = [], []
        for i, data in enumerate(per_link):
            parent = topology.parents[i]
            value, output = step(support_value if parent < 0 else values[parent], data)
            values.append(value)
            outputs.append(output)
        return values, outputs
    schedule = level_schedule(topology)
    root = jax.tree.map(lambda r: jnp.broadcast_to(r, (schedule.width,) + jnp.shape(r)), support_value)

    def level(parent_values, xs):
        data, parent_slot = xs
        return _twice(jax.vmap(step)(jax.tree.map(lambda c: c[parent_slot], parent_values), data))

    _, (values, outputs) = jax.lax.scan(level, root, (_by_level(schedule, per_link), schedule.parent_slot))
    return _by_link(schedule, values), _by_link(schedule, outputs)


def _twice(value_and_output):
    value, output = value_and_output
    return value, (value, output)


def inward(topology, step, no_hand_off, per_link):
    """Inward sweep over every link, children before parents.

    ``step(children_sum, link_data) -> (hand_off, output)`` works on one link: ``children_sum`` is the sum of
    the hand-offs of the link's children, ``no_hand_off`` (zeros of one hand-off's shape) for a leaf; the root
    links' hand-offs are dropped. ``per_link``: stacked (n, ...) arrays (level scan; returns the outputs of
    every link stacked) or a list of n per-link data (unrolled; returns a list)."""
    if isinstance(per_link, list):
        n = len(per_link)
        children, outputs = [None] * n, [None] * n
        for i in reversed(range(n)):
            hand_off, outputs[i] = step(no_hand_off if children[i] is None else children[i], per_link[i])
            parent = topology.parents[i]
            if parent >= 0:
                children[parent] = hand_off if children[parent] is None else children[parent] + hand_off
        return outputs
    schedule = level_schedule(topology)
    none_yet = jax.tree.map(lambda z: jnp.broadcast_to(z, (schedule.width,) + jnp.shape(z)), no_hand_off)

    def level(hand_offs, xs):
        data, child_slots = xs
        children_sum = jax.tree.map(lambda h: _sum_children(h, child_slots), hand_offs)
        return jax.vmap(step)(children_sum, data)

    _, outputs = jax.lax.scan(level, none_yet, (_by_level(schedule, per_link), schedule.child_slots), reverse=True)
    return _by_link(schedule, outputs)


def _sum_children(hand_offs, child_slots):
    """Σ over each slot's children of their hand-offs; slot W (padding) reads an appended zero row."""
    padded = jnp.concatenate([hand_offs, jnp.zeros_like(hand_offs[:1])])
    return jnp.sum(padded[child_slots], axis=1)


def subtree_totals(topology, own, local_R, local_p, transport):
    """For every link, its ``own`` quantity plus its children's totals carried into its frame: an inward
    sweep computing, with ``transport = transform_inertia``, the composite inertias Iᶜᵢ = Iᵢ + Σ_c ᶦX*_c Iᶜ_c
    ᶜXᵢ (Featherstone Table 6.2), and with ``act_force`` the RNEA's joint forces fᵢ = fᵢᴮ + Σ_c ᶦX*_c f_c
    (Table 5.1). ``own``, ``local_R``, ``local_p`` (each link's placement in its parent): stacked (n, ...)
    arrays, or lists (the unrolled route; returns a list)."""
    def step(children, link):
        own_i, R, p = link
        total = own_i + children
        return transport(R, p, total), total

    per_link = list(zip(own, local_R, local_p)) if isinstance(own, list) else (own, local_R, local_p)
    return inward(topology, step, jnp.zeros_like(own[0]), per_link)
