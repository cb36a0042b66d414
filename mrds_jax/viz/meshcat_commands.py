"""meshcat's drawing commands as plain dicts, without the meshcat package: the few the browser viewer sends (a mesh of
a box, sphere or cylinder with a Lambert material, a property, an animation of position, quaternion and scale),
each written exactly as meshcat 0.3.2's ``lower()`` writes it (its ``geometry``, ``commands`` and ``animation``
modules; tests/test_viewer.py compares them where meshcat is installed). The meshcat package would bring its server
stack (IPython, jedi, pyzmq, tornado, pyngrok) for what is here a few dictionaries; its viewer script, which plays
them in the page, is shipped in ``assets/`` (:func:`mrds_jax.viz.viewer.viewer_script`).
"""
import uuid

IDENTITY = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
# meshcat's GenericMaterial defaults (opaque, double-sided), as lowered
MATERIAL_DEFAULTS = {"reflectivity": 0.5, "side": 2, "transparent": False, "opacity": 1.0, "linewidth": 1.0,
                     "wireframe": False, "wireframeLinewidth": 1.0, "vertexColors": 0}


def box(lengths):
    """A box of full side ``lengths`` (x, y, z)."""
    return {"type": "BoxGeometry", "width": float(lengths[0]), "height": float(lengths[1]),
            "depth": float(lengths[2])}


def sphere(radius):
    return {"type": "SphereGeometry", "radius": float(radius), "widthSegments": 20, "heightSegments": 20}


def cylinder(height, radius):
    """A cylinder along three.js's y axis, centred on its origin."""
    return {"type": "CylinderGeometry", "radiusTop": float(radius), "radiusBottom": float(radius),
            "height": float(height), "radialSegments": 50}


def set_object(path, geometry, color):
    """Draw ``geometry`` (:func:`box`, :func:`sphere`, :func:`cylinder`) at ``path`` (``/a/b``) in a Lambert
    material of ``color`` (0xRRGGBB)."""
    g, m, o = (str(uuid.uuid4()) for _ in range(3))
    return {"type": "set_object", "path": path, "object": {
        "metadata": {"version": 4.5, "type": "Object"},
        "geometries": [{"uuid": g, **geometry}],
        "materials": [{"uuid": m, "type": "MeshLambertMaterial", "color": int(color), **MATERIAL_DEFAULTS}],
        "object": {"uuid": o, "type": "Mesh", "geometry": g, "material": m, "matrix": list(IDENTITY)}}}


def set_property(path, key, value):
    return {"type": "set_property", "path": path, "property": key.lower(), "value": value}


def track(name, jstype, values):
    """One animated property (``position``, ``quaternion``, ``scale``; three.js type ``vector3`` or
    ``quaternion``), one key per frame (its index: the page divides by the clip's fps)."""
    return {"name": "." + name, "type": jstype,
            "keys": [{"time": i, "value": [float(x) for x in v]} for i, v in enumerate(values)]}


def set_animation(tracks_by_path, fps, repetitions):
    """One animation of the objects at the paths of ``tracks_by_path`` ({path: [track, ...]}), playing at once."""
    return {"type": "set_animation", "path": "",
            "animations": [{"path": path, "clip": {"fps": fps, "name": "default", "tracks": tracks}}
                           for path, tracks in tracks_by_path.items()],
            "options": {"play": True, "repetitions": repetitions}}
