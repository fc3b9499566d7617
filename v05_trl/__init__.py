"""v05-trl: V0.5 (arXiv 2603.10848) for Hugging Face TRL.

A generalist value model's prediction serves as a prior for the GRPO baseline; it is shrunk towards the empirical
mean of sparse rollouts as far as the rollouts contradict it, and more rollouts are drawn only where one more
lowers the baseline's estimated MSE by more than it costs.
"""

from .estimator import (
    NOISE_MODELS,
    PRIOR_NOISE_FLOOR,
    GroupStatistics,
    ShrinkageBaseline,
    group_statistics,
    osla_extra_rollouts,
    osla_gain,
    prior_to_reward_scale,
    reward_noise_variance,
    shrinkage_baseline,
    validate_reward_range,
)

__version__ = "0.1.0.dev0"

_TRAINER_EXPORTS = {"V05GRPOConfig": "config", "V05GRPOTrainer": "trainer"}


def __getattr__(name: str):
    # The trainer and its config import TRL and transformers; load them on first use so that the estimator stays
    # importable on its own (torch only).
    if name in _TRAINER_EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_TRAINER_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NOISE_MODELS",
    "PRIOR_NOISE_FLOOR",
    "GroupStatistics",
    "ShrinkageBaseline",
    "V05GRPOConfig",
    "V05GRPOTrainer",
    "__version__",
    "group_statistics",
    "osla_extra_rollouts",
    "osla_gain",
    "prior_to_reward_scale",
    "reward_noise_variance",
    "shrinkage_baseline",
    "validate_reward_range",
]
