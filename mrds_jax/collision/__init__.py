"""Layer 4: collision — primitives on module frames or the ground (:mod:`.geoms`), the narrow phase's fixed
contact slots per pair (:mod:`.narrowphase`, on the geometric queries of :mod:`.closest_points`), and the
filtered pair list with per-slot friction and restitution (:mod:`.model`), and the broad phase that picks the pairs
that can touch before any narrow phase runs (:mod:`.broadphase`)."""
from .geoms import (KINDS, CollisionError, CollisionWarning, Geom, box, capsule, cylinder, ellipsoid, geom_world_pose,
                    mesh, normal_rotation, plane, sphere)
from .closest_points import contact_frame
from .convex import PRECISE, ConvexSettings, convex_contact
from .broadphase import BroadPhase
from .narrowphase import SLOTS, ContactSlots, collide, supports
from .model import CollisionModel, SlotSet, collision_model, contact_slots, geom_world_poses
