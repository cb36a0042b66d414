"""The collision model: pair filtering as MuJoCo does it, explicit pairs and excludes, friction mixing, the
warning for pairs the narrow phase cannot collide, every bad input's named error, and the concatenated slots."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mrds_jax.collision import (CollisionError, CollisionWarning, box, capsule, collide, collision_model,
                                contact_slots, cylinder, geom_world_pose, geom_world_poses, plane, sphere)
from mrds_jax.model import ModuleBuilder
from mrds_jax.spatial import rot_x, rot_z


def _arm():
    """base (welded to the world) - l1 - l2 = l3 (fixed joint) - l4, one operational point per link."""
    b = ModuleBuilder()
    b.add_link("base", joint="fixed")
    b.add_link("l1", parent="base", position=(0, 0, 0.1))
    b.add_link("l2", parent="l1", position=(0.3, 0, 0))
    b.add_link("l3", parent="l2", joint="fixed", position=(0.3, 0, 0))
    b.add_link("l4", parent="l3", position=(0.1, 0, 0))
    for link in ("base", "l1", "l2", "l3", "l4"):
        b.add_frame(f"f_{link}", link=link, position=(0.05, 0, 0))
    return b.build()


def _ball():
    b = ModuleBuilder()
    b.add_link("body", joint="free")
    b.add_frame("c", link="body")
    return b.build()


MODULES = {"arm": _arm(), "ball": _ball()}


def _geoms(**changes):
    g = dict(
        floor=plane("floor"),
        base_box=box("base_box", "arm", "f_base", (0.1, 0.1, 0.05)),
        s1=sphere("s1", "arm", "f_l1", 0.05, friction=0.5),
        s2=capsule("s2", "arm", "f_l2", 0.05, 0.1),
        s3=sphere("s3", "arm", "f_l3", 0.05),
        s4=sphere("s4", "arm", "f_l4", 0.05, restitution=0.4),
        ball=sphere("ball", "ball", "c", 0.1, friction=0.8, restitution=0.1),
        ball2=box("ball2", "ball", "c", (0.05, 0.05, 0.05)),
    )
    g.update(changes)
    return [v for v in g.values() if v is not None]


def _names(model):
    return {frozenset(p) for p in model.pair_names()}


def _pairs(*names):
    return {frozenset(n.split("-")) for n in names}


ALL_BALL = ["ball-floor", "ball-base_box", "ball-s1", "ball-s2", "ball-s3", "ball-s4", "ball2-floor",
            "ball2-base_box", "ball2-s1", "ball2-s2", "ball2-s3", "ball2-s4"]


def test_filtering_same_body_welds_parent_child_and_the_world():
    model = collision_model(_geoms(), MODULES)
    # floor-base_box: both on the world (the base is welded to it); s1-s2, s1-s3 (l3 welded to l2), s2-s4, s3-s4
    # (l4's parent l3 is l2's weld): parent-child; s2-s3: one body; ball-ball2: one body. The world takes no
    # part in the parent-child rule, so base_box (world) collides with s1 (l1, whose parent is the base).
    assert _names(model) == _pairs("floor-s1", "floor-s2", "floor-s3", "floor-s4", "base_box-s1", "base_box-s2",
                                   "base_box-s3", "base_box-s4", "s1-s4", *ALL_BALL)
    for (i, j) in model.pairs:                                   # KINDS order within each pair
        kinds = ("plane", "sphere", "capsule", "box", "cylinder")
        assert kinds.index(model.geoms[i].kind) <= kinds.index(model.geoms[j].kind)
    assert model.slots == tuple(
        {"plane-sphere": 1, "plane-capsule": 2, "plane-box": 4, "sphere-box": 1, "capsule-box": 4,
         "sphere-sphere": 1, "sphere-capsule": 1, "box-box": 17}[f"{model.geoms[i].kind}-{model.geoms[j].kind}"]
        for i, j in model.pairs)
    assert model.n_slots == sum(model.slots) and len(model.slot_pair) == model.n_slots


def test_contype_conaffinity_explicit_pairs_and_excludes():
    # ball: contype 2, conaffinity 0 -> meets only geoms whose conaffinity has bit 2 (s4 below)
    geoms = _geoms(ball=sphere("ball", "ball", "c", 0.1, contype=2, conaffinity=0),
                   s4=sphere("s4", "arm", "f_l4", 0.05, conaffinity=3))
    model = collision_model(geoms, MODULES, pairs=[("s1", "s2", {"friction": 0.3, "restitution": 0.2})],
                            excludes=[(("arm", "l1"), None), (("ball", "body"), ("arm", "l3"))])
    names = _names(model)
    assert frozenset(["ball", "s4"]) in names and frozenset(["ball", "floor"]) not in names
    assert frozenset(["s1", "s2"]) in names                                  # explicit, despite parent-child
    assert not names & _pairs("floor-s1", "base_box-s1")                     # excluded: l1 against the world
    assert not names & _pairs("ball2-s2", "ball2-s3")                        # excluded: body against l3 = l2
    k = model.pair_names().index(tuple(n for n in ("s1", "s2")))
    assert float(model.friction[k]) == 0.3 and float(model.restitution[k]) == 0.2


def test_friction_mixing_and_restitution():
    model = collision_model(_geoms(), MODULES)
    by_name = dict(zip(map(frozenset, model.pair_names()), zip(np.asarray(model.friction),
                                                                np.asarray(model.restitution))))
    assert by_name[frozenset(["ball", "s1"])] == (0.8, 0.1)                  # max of 0.5 and 0.8
    assert by_name[frozenset(["s4", "ball"])] == (1.0, 0.4)                  # restitution: max
    prioritised = collision_model(_geoms(ball=sphere("ball", "ball", "c", 0.1, friction=0.2, priority=1)), MODULES)
    by_name = dict(zip(map(frozenset, prioritised.pair_names()), np.asarray(prioritised.friction)))
    assert by_name[frozenset(["ball", "s1"])] == 0.2                         # the higher priority's friction


def test_unsupported_pairs_are_summarised_by_kind_in_one_warning_and_left_out():
    """Left-out pairs are counted by kind in one warning (one example each), not named one by one; the cylinder
    pairs the convex route handles are kept."""
    geoms = _geoms(c1=cylinder("c1", "ball", "c", 0.1, 0.2), c2=cylinder("c2", "arm", "f_l4", 0.1, 0.2),
                   tray=plane("tray", "arm", "f_l1"))
    with pytest.warns(CollisionWarning) as record:
        model = collision_model(geoms, MODULES)
    assert len(record) == 1
    assert "1 geom pair(s) left out" in str(record[0].message)
    assert "1 plane–plane (e.g. 'floor' – 'tray')" in str(record[0].message)
    assert frozenset(["c1", "c2"]) in _names(model) and frozenset(["c1", "floor"]) in _names(model)
    assert frozenset(["floor", "tray"]) not in _names(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        collision_model(geoms, MODULES, warn=False)


def test_unsupported_summary_counts_kinds():
    from mrds_jax.collision.model import unsupported_summary
    floor, tray, lid = (plane(n) for n in ("floor", "tray", "lid"))
    text = unsupported_summary([(floor, tray), (tray, lid), (floor, lid)])
    assert text == ("3 geom pair(s) left out, the narrow phase cannot collide them: 3 plane–plane "
                    "(e.g. 'floor' – 'tray')")


@pytest.mark.parametrize("make,match", [
    (lambda: sphere("s", None, None, 0.1, friction=-0.1), "geom 's' .*friction"),
    (lambda: sphere("s", None, None, 0.1, friction=float("inf")), "geom 's' .*friction"),
    (lambda: sphere("s", None, None, 0.1, restitution=1.5), "geom 's' .*restitution"),
    (lambda: sphere("s", None, None, 0.0), "geom 's' .*radius"),
    (lambda: capsule("c", None, None, 0.1, -1.0), "geom 'c' .*half_length"),
    (lambda: box("b", None, None, (0.1, float("nan"), 0.1)), "geom 'b' .*half_extents"),
    (lambda: cylinder("y", None, None, float("nan"), 0.1), "geom 'y' .*radius"),
    (lambda: plane("p", normal=(0, 0, 0)), "geom 'p' .*normal"),
    (lambda: sphere("s", None, None, 0.1, rotation=np.diag([1.0, 1.0, -1.0])), "geom 's' .*rotation"),
    (lambda: sphere("s", "ball", None, 0.1), "geom 's' .*module and frame"),
    (lambda: collision_model([sphere("s", "nope", "c", 0.1)], MODULES), "geom 's'.*no module named 'nope'"),
    (lambda: collision_model([sphere("s", "ball", "nope", 0.1)], MODULES), "geom 's'.*no operational point 'nope'"),
    (lambda: collision_model(_geoms(), MODULES, pairs=[("s1", "ghost")]), r"pair \('s1', 'ghost'\).*ghost"),
    (lambda: collision_model(_geoms(), MODULES, pairs=[("s1", "s2", {"friction": -1})]), r"'s2'\).*friction"),
    (lambda: collision_model(_geoms(), MODULES, pairs=[("s1", "s2", {"mu": 1})]), "unknown option"),
    (lambda: collision_model(_geoms(), MODULES, excludes=[(("arm", "l9"), None)]), "no link 'l9'"),
    (lambda: collision_model(_geoms(), MODULES, excludes=[(("leg", "l1"), None)]), "no module named 'leg'"),
    (lambda: collision_model([plane("a"), plane("a")], MODULES), "two geoms are named 'a'"),
])
def test_bad_input_raises_a_named_collision_error(make, match):
    with pytest.raises(CollisionError, match=match):
        make()


def test_contact_slots_concatenate_the_pairs_and_batch():
    geoms = [plane("floor", friction=0.6), sphere("ball", "ball", "c", 0.1, friction=0.9),
             box("crate", "arm", "f_l4", (0.1, 0.2, 0.1), position=(0.0, 0.0, 0.05))]
    model = collision_model(geoms, MODULES)
    assert model.pair_names() == (("floor", "ball"), ("floor", "crate"), ("ball", "crate"))

    def slots_at(ball_p, arm_R):
        poses = [geom_world_pose(geoms[0]), geom_world_pose(geoms[1], jnp.eye(3), ball_p),
                 geom_world_pose(geoms[2], arm_R, jnp.array([0.5, 0.0, 0.3]))]
        return contact_slots(model, poses)

    ball_p = jnp.array([0.1, 0.2, 0.35])
    out = jax.jit(slots_at)(ball_p, jnp.asarray(rot_z(0.3)))
    assert out.gap.shape == (model.n_slots,) == (1 + 4 + 1,)
    np.testing.assert_allclose(out.gap[0], 0.25, atol=1e-15)
    np.testing.assert_allclose(out.friction, [0.9] + [1.0] * 4 + [1.0])          # crate: friction 1 (default)
    assert out.pair.tolist() == list(model.slot_pair)
    R, p = geom_world_pose(geoms[2], jnp.asarray(rot_z(0.3)), jnp.array([0.5, 0.0, 0.3]))
    np.testing.assert_allclose(p, [0.5, 0.0, 0.35], atol=1e-15)
    direct = jax.jit(collide, static_argnums=(0, 1))("sphere", "box", jnp.eye(3), ball_p, geoms[1].size, R, p,
                                                      geoms[2].size)
    np.testing.assert_allclose(out.gap[-1:], direct.gap, atol=1e-15)
    batch = jax.jit(jax.vmap(slots_at))(ball_p + jnp.zeros((4, 1)), jnp.stack([rot_x(a) for a in range(4)]))
    assert batch.gap.shape == (4, model.n_slots) and batch.frame.shape == (4, model.n_slots, 3, 3)
    # the geometry is a leaf: d(gap of ball on floor)/d(radius) = -1
    grad = jax.jit(jax.grad(lambda m: contact_slots(m, [geom_world_pose(g) if g.is_ground else (jnp.eye(3), ball_p)
                                                        for g in m.geoms]).gap[0]))(model)
    assert float(grad.geoms[1].size[0]) == -1.0


def test_traced_geometry_is_checked_for_shape_only():
    size = jax.jit(lambda r, h: capsule("c", "ball", "c", r, h, friction=r).size)(0.3, 0.2)
    np.testing.assert_allclose(size, [0.3, 0.2, 0.0])
    with pytest.raises(CollisionError, match="geom 'b'.*position has shape"):
        jax.jit(lambda p: box("b", None, None, (0.1, 0.1, 0.1), position=p).size)(jnp.zeros(2))


def test_an_empty_model_has_no_slots():
    model = collision_model([plane("floor"), sphere("ball", "ball", "c", 0.1, contype=0, conaffinity=0)], MODULES)
    assert model.pairs == () and model.n_slots == 0 and model.geom_frames == (("ball", "c"),)
    out = jax.jit(contact_slots)(model, [geom_world_pose(model.geoms[0]), (jnp.eye(3), jnp.zeros(3))])
    assert out.gap.shape == (0,) and out.frame.shape == (0, 3, 3)


def test_geom_world_poses_name_a_missing_placement():
    model = collision_model(_geoms(), MODULES)
    with pytest.raises(CollisionError, match=r"\('arm', 'f_l1'\)"):
        geom_world_poses(model, {("ball", "c"): (jnp.eye(3), jnp.zeros(3))})


def test_slots_grouped_by_pair_kind_keep_pair_order():
    """contact_slots computes the pairs of one kind in one vmap; its slots are those of collide() pair by pair,
    concatenated in pair order."""
    geoms = _geoms(c1=cylinder("c1", "ball", "c", 0.1, 0.2), c2=cylinder("c2", "arm", "f_l4", 0.1, 0.2),
                   base_box=None, s2=None, ball2=None)               # one convex kind (cylinder–cylinder): quick
    model = collision_model(geoms, MODULES)
    rng = np.random.default_rng(0)
    poses = [(jnp.asarray(np.linalg.qr(rng.normal(size=(3, 3)))[0] * [1, 1, 1]), jnp.asarray(rng.normal(size=3) * 0.3))
             for _ in model.geoms]
    poses = [(R * jnp.sign(jnp.linalg.det(R)), p) for R, p in poses]
    slots = jax.jit(contact_slots)(model, poses)
    expected = [jax.jit(collide, static_argnums=(0, 1))(model.geoms[i].kind, model.geoms[j].kind, *poses[i], model.geoms[i].size, *poses[j],
                        model.geoms[j].size) for i, j in model.pairs]
    assert len({(model.geoms[i].kind, model.geoms[j].kind) for i, j in model.pairs}) > 2
    for field in ("gap", "point", "frame", "valid"):
        np.testing.assert_allclose(np.asarray(getattr(slots, field), dtype=float),
                                   np.concatenate([np.asarray(getattr(e, field), dtype=float) for e in expected]),
                                   atol=1e-12, err_msg=field)


def test_a_contact_on_an_edge_two_boxes_share_is_one_slot():
    """A chamfered wall made of boxes (the wall below the chamfer, and the chamfer's wedge turned 45° about y, whose
    lower edge is the wall's top inner edge): a capsule's end sphere r + d from that shared edge, from a direction
    between the wall's and the chamfer's normals, touches the wall at one point, the edge, at distance d (the
    union's nearest point: analytic). Each box's narrow phase reports that contact (the raw slots: twice, same
    point, normal and gap); the model keeps one of them (two equal cones at one point are one cone: the copy
    only made the Delassus matrix singular)."""
    R, T, D, w, L = 0.0102, 0.02, 0.05, 0.003, 0.04
    t = w / np.sqrt(2.0)
    wall = box("wall", None, None, (T / 2, L, (D - w) / 2), position=(R + T / 2, 0.0, -(D + w) / 2))
    wedge = box("wedge", None, None, (w / np.sqrt(2.0), L, t / 2),
                position=(R + w / 2 + t / 2 / np.sqrt(2.0), 0.0, -w / 2 - t / 2 / np.sqrt(2.0)),
                rotation=np.array([[np.cos(-np.pi / 4), 0, np.sin(-np.pi / 4)], [0, 1, 0],
                                   [-np.sin(-np.pi / 4), 0, np.cos(-np.pi / 4)]]))
    r, d = 0.01, 2e-5
    u = np.array([-1.0, 0.0, 0.2]) / np.linalg.norm([-1.0, 0.0, 0.2])   # between −x and (−1, 0, 1)/√2
    edge = np.array([R, 0.0, -w])
    tip = edge + (r + d) * u
    peg = capsule("peg", "ball", "c", r, 0.03, position=(0.0, 0.0, 0.03))
    model = collision_model([peg, wall, wedge], MODULES)
    poses = [geom_world_pose(peg, jnp.eye(3), jnp.asarray(tip)), geom_world_pose(wall), geom_world_pose(wedge)]
    raw = [collide("capsule", "box", *poses[0], peg.size, *poses[k], model.geoms[k].size) for k in (1, 2)]
    raw_gap = np.concatenate([np.asarray(s.gap)[np.asarray(s.valid)] for s in raw])
    assert np.sum(np.abs(raw_gap - d) < 1e-12) >= 2                           # each box reports the edge contact
    slots = jax.jit(contact_slots)(model, poses)
    gap, valid = np.asarray(slots.gap), np.asarray(slots.valid)
    near = valid & (gap < d + 1e-6)
    assert near.sum() == 1, gap[valid]
    k = int(np.flatnonzero(near)[0])
    np.testing.assert_allclose(gap[k], d, atol=1e-12)
    np.testing.assert_allclose(abs(np.dot(np.asarray(slots.frame[k, 0]), u)), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.min(gap[valid]), d, atol=1e-12)           # the nearest distance is kept


def test_convex_pairs_of_several_kinds_share_one_body_with_the_same_slots():
    """The general convex route's pairs of several kinds (here capsule–cylinder and cylinder–cylinder, as on Go1)
    form one group (pair_groups) computed by one traced body, each geom's kind a code into the
    group's kinds (convex.per_kind): its slots equal collide() pair by pair, each kind on its own body, apart and
    overlapping."""
    from mrds_jax.collision.model import pair_groups
    geoms = [cylinder("c1", "ball", "c", 0.1, 0.2), capsule("k2", "arm", "f_l2", 0.05, 0.1),
             cylinder("c4", "arm", "f_l4", 0.08, 0.1), capsule("k1", "arm", "f_l1", 0.04, 0.1)]
    model = collision_model(geoms, MODULES)
    groups = pair_groups(model)
    union = [kinds for kinds in groups if isinstance(kinds[0], tuple)]
    assert len(union) == 1 and len(groups[union[0]]) >= 3 and union[0] == (("capsule", "cylinder"), ("cylinder",))
    rng = np.random.default_rng(3)
    for spread in (0.05, 0.4):                                   # most pairs overlapping, then most apart
        poses = [(jnp.asarray(np.linalg.qr(rng.normal(size=(3, 3)))[0]), jnp.asarray(rng.normal(size=3) * spread))
                 for _ in model.geoms]
        poses = [(R * jnp.sign(jnp.linalg.det(R)), p) for R, p in poses]
        slots = jax.jit(contact_slots)(model, poses)
        for k, (i, j) in enumerate(model.pairs):
            e = jax.jit(collide, static_argnums=(0, 1))(model.geoms[i].kind, model.geoms[j].kind, *poses[i],
                                                         model.geoms[i].size, *poses[j], model.geoms[j].size)
            sel = np.asarray(slots.pair) == k
            for field in ("gap", "point", "frame"):
                np.testing.assert_allclose(np.asarray(getattr(slots, field))[sel], np.asarray(getattr(e, field)),
                                           atol=1e-12, err_msg=f"{field} of {model.pair_names()[k]}")
