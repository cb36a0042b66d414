"""See it move: stick-figure geometry of a trajectory (:mod:`.scene`), matplotlib animations as GIF/MP4
(:mod:`.animation`) and a browser viewer (:mod:`.viewer`: meshcat's viewer script, shipped in ``assets/``, playing
the drawing commands of :mod:`.meshcat_commands`)."""
from .animation import animate
from .scene import Scene, scene

__all__ = ["Scene", "animate", "scene"]
