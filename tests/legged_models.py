"""A four-legged body standing on point contacts, built two ways (test models).

*Natural* (general MRDS path, and Pinocchio): one module — a free trunk and four 3-DOF legs (hip roll about
x, hip pitch about y, knee about y) — with each foot held at a ground point by a 3-D point contact
(``spherical`` contact to the ground: translations locked, rotations free, n_c = 3).

*Lilly & Orin Type 1* (seed 000, §2): the trunk is the reference member; each leg is a chain whose base
is the support surface. Its unpowered foot contact is the chain's first general joint — a point contact
is a spherical joint at the ground point — then the knee and hip-pitch joints (the leg re-rooted at the
foot), and the actuated hip-roll joint is the chain's tip contact (a revolute contact to the trunk whose
motor torque is the known free-direction force Fᵘ, Lilly's h_k).

Re-rooting keeps every link's axes and inertia about its centre of mass; only the link-frame origins move
(to the joint nearer the foot), and the knee and hip-pitch coordinates change sign.
"""
import functools

import numpy as np
import pinocchio as pin

from mrds_jax import contacts as C
from mrds_jax import system as S
from mrds_jax.model import ModuleBuilder
from robots import random_inertia

HIPS = np.array([[0.3, 0.15, 0.0], [0.3, -0.15, 0.0], [-0.3, 0.15, 0.0], [-0.3, -0.15, 0.0]])
L_THIGH, L_SHANK = 0.25, 0.25
ROLL_TORQUE = np.array([1.5, -0.8, 0.6, -1.2])    # constant hip-roll motor torques (Fᵘ of the Type 1 tips)


def _roll_free_force(i, t):
    return np.array([-ROLL_TORQUE[i]])


# one function object per leg, shared by every build (static contact fields must match to stack systems)
ROLL_FREE_FORCE = tuple(functools.partial(_roll_free_force, i) for i in range(4))


def leg_parameters(rng):
    """Per leg: (hip-pitch offset o1 in the hip link, [(mass, com, inertia) of hip link, thigh, shank])."""
    legs = []
    for i in range(4):
        side = 1.0 if HIPS[i, 1] > 0 else -1.0
        o1 = np.array([0.0, side * 0.08, 0.0])
        links = [(rng.uniform(0.3, 0.8), np.array([0.0, side * 0.04, 0.0]) + rng.uniform(-0.01, 0.01, 3)),
                 (rng.uniform(0.8, 1.5), np.array([0.0, 0.0, -0.1]) + rng.uniform(-0.02, 0.02, 3)),
                 (rng.uniform(0.3, 0.7), np.array([0.0, 0.0, -0.12]) + rng.uniform(-0.02, 0.02, 3))]
        legs.append((o1, [(m, c, random_inertia(rng) * 0.1) for m, c in links]))
    return legs


def natural_module(rng, legs):
    b = ModuleBuilder()
    b.add_link("trunk", joint="free", mass=8.0, com=rng.uniform(-0.02, 0.02, 3), inertia=random_inertia(rng))
    for i, (o1, ((mh, ch, Ih), (mt, ct, It), (ms, cs, Is))) in enumerate(legs):
        b.add_link(f"hip{i}", parent="trunk", joint="revolute", axis=(1, 0, 0), position=HIPS[i], mass=mh, com=ch,
                   inertia=Ih)
        b.add_link(f"thigh{i}", parent=f"hip{i}", joint="revolute", axis=(0, 1, 0), position=o1, mass=mt, com=ct,
                   inertia=It)
        b.add_link(f"shank{i}", parent=f"thigh{i}", joint="revolute", axis=(0, 1, 0), position=(0, 0, -L_THIGH),
                   mass=ms, com=cs, inertia=Is)
        b.add_frame(f"foot{i}", f"shank{i}", position=(0, 0, -L_SHANK))
    return b.build()


def natural_system(module, feet):
    """The natural model with every foot held at its ground point ``feet[i]`` (world)."""
    contacts = [C.spherical(f"foot{i}", None, ("quad", f"foot{i}"), ground_position=feet[i]) for i in range(4)]
    return S.build_system({"quad": module}, contacts)


def rerooted_leg(o1, links, foot):
    """Lilly Type 1 chain: spherical foot joint at the ground point, knee, hip pitch; tip at the hip-roll
    joint (hip-link axes)."""
    (mh, ch, Ih), (mt, ct, It), (ms, cs, Is) = links
    b = ModuleBuilder()
    b.add_link("shank", joint="spherical", position=foot, mass=ms, com=cs + [0, 0, L_SHANK], inertia=Is)
    b.add_link("thigh", parent="shank", joint="revolute", axis=(0, 1, 0), position=(0, 0, L_SHANK), mass=mt,
               com=ct + [0, 0, L_THIGH], inertia=It)
    b.add_link("hip", parent="thigh", joint="revolute", axis=(0, 1, 0), position=(0, 0, L_THIGH), mass=mh,
               com=ch - o1, inertia=Ih)
    b.add_frame("tip", "hip", position=-o1)
    return b.build()


def type1_system(natural, legs, feet):
    """Trunk (reference member, a free rigid body with the hip points) + four re-rooted legs, each joined to
    the trunk by an actuated revolute hip-roll contact: E = leg tip, P = trunk; Fᵘ = torque by the leg on
    the trunk about x = −(motor torque on the hip link)."""
    p = natural.params
    b = ModuleBuilder()
    b.add_link("trunk", joint="free", mass=float(p.mass[0]), com=np.asarray(p.com[0]), inertia=np.asarray(p.inertia[0]))
    for i in range(4):
        b.add_frame(f"hip{i}", "trunk", position=HIPS[i])
    modules = {"trunk": b.build()}
    contacts = []
    for i, (o1, links) in enumerate(legs):
        modules[f"leg{i}"] = rerooted_leg(o1, links, feet[i])
        contacts.append(C.revolute(f"roll{i}", (f"leg{i}", "tip"), ("trunk", f"hip{i}"), axis=(1, 0, 0),
                                   applied=ROLL_FREE_FORCE[i]))
    return S.build_system(modules, contacts)


def random_standing_state(rng):
    """Trunk pose (ours: [p, quaternion w-first]) and leg angles (roll, pitch, knee) x 4."""
    axis_angle = rng.uniform(-0.25, 0.25, 3)
    R = pin.exp3(axis_angle)
    pos = np.array([0.0, 0.0, 0.42]) + rng.uniform(-0.05, 0.05, 3)
    quat = pin.Quaternion(R)
    q_trunk = np.concatenate([pos, [quat.w, quat.x, quat.y, quat.z]])
    angles = np.stack([rng.uniform(-0.3, 0.3, 4), rng.uniform(0.3, 0.9, 4), rng.uniform(-1.6, -0.6, 4)], axis=1)
    return np.concatenate([q_trunk, angles.ravel()])
