"""Monte Carlo over parameters and initial states (layer 7): samplers, chunked sharded runs, checkpoints."""
from .runner import (CheckpointMismatch, CheckpointWarning, Interrupted, MonteCarloResult, TaskOutputError,
                     make_chunk_runner, run_monte_carlo, task_identity)
from .samplers import Normal, Sampler, ToleranceBand, TruncatedNormal, Uniform, sample, scenario_keys
