"""Front door: read robot descriptions from files (MuJoCo MJCF, URDF). System files (TOML) are :mod:`mrds_jax.sysfile`.

* :func:`~mrds_jax.loaders.urdf.load_urdf` — one URDF robot as one :class:`~mrds_jax.model.Module`;
* :func:`~mrds_jax.loaders.mjcf.load_mjcf` — a MuJoCo model as a whole system: one module per kinematic tree,
  ``<equality connect/weld>`` as contacts, actuators and joint springs as force elements.

The submodules load on first use (MJCF needs MuJoCo's compiler; neither is imported with ``mrds_jax``).
"""
