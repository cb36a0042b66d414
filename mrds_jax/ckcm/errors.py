"""Exceptions raised by the CKCM end-effector model on bad input.

All derive from ``ValueError`` (bad input, not a bug), except ``ForwardKinematicsError`` which derives from
``RuntimeError`` as well as ``ValueError`` so that either ``except`` clause catches it.
"""
from ..validation import InputError, SingularConfigurationWarning


class CKCMInputError(InputError):
    """Base class for bad input to the CKCM model."""


class AttachmentError(CKCMInputError):
    """θA or θB (Nguyen & Pooran eq. 2) make two attachment points coincide, or nearly (Nguyen & Pooran eq. 3-4)."""


class WorkspaceError(CKCMInputError):
    """A pose (x, y, z, α, β, γ) outside the workspace: a leg length outside its stroke, a leg not pointing
    up from the base, or the Z-Y-X Euler singularity |β| = 90°."""


class StrokeError(CKCMInputError):
    """A leg length outside the actuator stroke [l_min, l_max] (see ``CKCMParams.stroke``)."""


class CKCMStateError(CKCMInputError):
    """A system state that is not a CKCM state: wrong shapes, or leg tips away from their ball joints."""


class ForwardKinematicsError(CKCMInputError, RuntimeError):
    """Newton iteration for the forward kinematics did not converge."""


class SingularConfigurationError(CKCMInputError, RuntimeError):
    """The leg Jacobian of Nguyen & Pooran eq. 26-27 is (numerically) singular at the pose."""


class SingularPoseWarning(SingularConfigurationWarning):
    """Forces asked at a (near) singular pose: cond(C) beyond the limit (C = ∂l/∂Φ, Nguyen & Pooran eq. 26-27),
    the actuator forces C⁻ᵀ F unreliable.  A :class:`~mrds_jax.validation.SingularConfigurationWarning`, so one
    filter covers the CKCM models and the system layer's ``forward_dynamics``."""


class ComplianceError(CKCMInputError):
    """Settings or a reference of the compliant force controller (``compliance``) that cannot work."""


class StiffnessError(ComplianceError):
    """A compliance stiffness K that is not a symmetric positive definite (6, 6) matrix."""


class DampingError(ComplianceError):
    """A compliance damping D whose symmetric part has a negative eigenvalue (it would feed energy in)."""


class ComplianceCentreError(ComplianceError):
    """A compliance centre that is not finite."""
