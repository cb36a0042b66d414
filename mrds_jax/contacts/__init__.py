"""Layer 4: contacts — the general joint model (Bonaventura Ch. 3.3) and a library of ready contacts."""
from .library import (LIBRARY, cylindrical, planar_contact, planar_revolute, planar_weld, point_on_line,
                      point_on_plane, prismatic, revolute, rigid_grasp, screw, spherical, universal, weld)
from .model import Contact, ContactError, check_dual, dual_basis, make_contact, validate_contact
from .coupling import CouplingError, JointCoupling, joint_coupling, make_coupling, tendon_coupling
from .variable import ContactModes, contact_modes, universal_modes
