"""Flexible links by assumed modes (Bonaventura Ch. 7-8, Appendix A): a module type for the system layer.

* :mod:`.modes` — clamped-free Bernoulli-Euler mode shapes and the modal integrals (Bonaventura eq. 126-129);
* :mod:`.chain` — :func:`flexible_chain`, planar chains of flexible links (the two-link and one-link
  fixed-base modules and the mobile one-link module of Ch. 8.1) as modules implementing
  :mod:`mrds_jax.dynamics.interface`, with motor torques (Bonaventura eq. 134) and the thesis' outputs;
* :mod:`.systems` — the six validation systems of Ch. 8.3 (Tables 21-33), ready to simulate;
* :mod:`.segmented` — the lumped reference: each link as rigid segments joined by rotational springs (the
  Working Model approach of Appendix B), built with our rigid modules and as MuJoCo MJCF.
"""
from .chain import (TABLE_22, ChainLayout, FlexibleModelError, beam_shapes, chain_layout, elastic_energy, flexible_chain,
                    link_outputs, motor_map, motor_torques)
from .modes import clamped_free_roots, mode_shape, mode_tables
from .systems import TABLE_21, FlexibleScenario, bonaventura_system
