"""Monte Carlo over parameters and initial states (layer 7): samplers, chunked sharded runs, checkpoints."""
from .runner import CheckpointMismatch, Interrupted, MonteCarloResult, make_chunk_runner, run_monte_carlo
from .samplers import Normal, Sampler, ToleranceBand, TruncatedNormal, Uniform, sample, scenario_keys
