"""Monte-Carlo simulation of GRPO and V0.5 baselines on known true pass rates.

Used by ``scripts/bench_baseline.py`` and ``scripts/eval_prior.py`` to measure what a baseline rule costs (rollouts
per prompt) and what it buys (MSE of the baseline against the true mean reward) without training anything.
Rollouts are Bernoulli draws at each prompt's true pass rate, mapped to the reward range; all methods of one seed
share the same draws (common random numbers), so their differences are not sampling noise between methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch

from .estimator import (
    osla_extra_rollouts,
    prior_to_reward_scale,
    reward_noise_variance,
    shrinkage_baseline,
    validate_reward_range,
)

__all__ = ["BaselineOutcome", "draw_rollouts", "simulate_grpo", "simulate_prior_only", "simulate_v05"]

Allocation = Literal["fixed", "sequential", "planned"]


class BaselineOutcome(NamedTuple):
    """Figures of one baseline rule on one batch of prompts (Python floats)."""

    mse: float
    """Mean over prompts of ``(baseline - true mean reward)^2``."""
    mean_rollouts: float
    """Rollouts drawn per prompt, on average."""
    frac_prior_rejected: float
    """Share of prompts whose prior got weight > 0 (NaN where no prior is used)."""
    frac_nonzero_advantage: float
    """Share of completions whose advantage ``reward - baseline`` is not zero (they carry a gradient)."""


def draw_rollouts(
    pass_rates: torch.Tensor, num_rollouts: int, reward_range: Sequence[float], generator: torch.Generator
) -> torch.Tensor:
    """``[P, num_rollouts]`` rewards: Bernoulli successes at each pass rate, mapped to ``lo`` (fail) / ``hi``."""
    lo, hi = validate_reward_range(reward_range)
    probs = pass_rates.double().unsqueeze(1).expand(-1, num_rollouts)
    return lo + (hi - lo) * torch.bernoulli(probs, generator=generator)


def _mean_of_first(rewards: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Mean of the first ``k[i]`` rewards of each row ``i``."""
    cumulative = rewards.cumsum(dim=1)
    return cumulative.gather(1, (k - 1).unsqueeze(1)).squeeze(1) / k.double()


def _outcome(rewards, k, baseline, true_mean, weight=None) -> BaselineOutcome:
    used = torch.arange(rewards.shape[1]).unsqueeze(0) < k.unsqueeze(1)
    nonzero = ((rewards - baseline.unsqueeze(1)).abs() > 1e-9) & used
    return BaselineOutcome(
        mse=float(((baseline - true_mean) ** 2).mean()),
        mean_rollouts=float(k.double().mean()),
        frac_prior_rejected=float((weight > 0).double().mean()) if weight is not None else float("nan"),
        frac_nonzero_advantage=float(nonzero.sum() / used.sum()),
    )


def simulate_grpo(rewards: torch.Tensor, true_mean: torch.Tensor, group_size: int) -> BaselineOutcome:
    """GRPO: the baseline is the mean of ``group_size`` rollouts (the first columns of ``rewards``)."""
    k = torch.full((rewards.shape[0],), group_size, dtype=torch.long)
    return _outcome(rewards, k, _mean_of_first(rewards, k), true_mean)


def simulate_prior_only(
    rewards: torch.Tensor, true_mean: torch.Tensor, prior_prob: torch.Tensor, group_size: int, reward_range
) -> BaselineOutcome:
    """The prior alone as baseline (a frozen critic), with ``group_size`` rollouts to carry the gradient."""
    k = torch.full((rewards.shape[0],), group_size, dtype=torch.long)
    return _outcome(rewards, k, prior_to_reward_scale(prior_prob, reward_range), true_mean)


def simulate_v05(
    rewards: torch.Tensor,
    true_mean: torch.Tensor,
    prior_prob: torch.Tensor,
    *,
    k_init: int = 4,
    k_max: int = 16,
    rollout_cost: float = 1 / 256,
    reward_range: Sequence[float] = (0.0, 1.0),
    noise_model: str = "worst_case",
    allocation: Allocation = "sequential",
    budget: int | None = None,
) -> BaselineOutcome:
    """V0.5: ``k_init`` rollouts, then OSLA (``"sequential"``: one rollout at a time while the rule asks;
    ``"planned"``: one allocation from the first stage, capped at ``budget`` extra rollouts in all when given;
    ``"fixed"``: none), then the shrinkage baseline.

    ``rewards`` is ``[P, >= k_max]`` (columns are drawn in order), ``prior_prob`` is ``[P]`` in [0, 1] or NaN.
    """
    if rewards.shape[1] < k_max:
        raise ValueError(f"rewards has {rewards.shape[1]} columns; need at least k_max={k_max}")
    prior_value = prior_to_reward_scale(prior_prob, reward_range)
    variance = reward_noise_variance(prior_prob, reward_range, noise_model)
    k = torch.full((rewards.shape[0],), k_init, dtype=torch.long)
    osla = {"max_rollouts": k_max, "rollout_cost": rollout_cost, "reward_range": reward_range}
    if allocation == "planned":
        k = k + osla_extra_rollouts(
            _mean_of_first(rewards, k), prior_value, k, variance, mode="planned", budget=budget, **osla
        )
    elif allocation == "sequential":
        while True:
            extra = osla_extra_rollouts(
                _mean_of_first(rewards, k), prior_value, k, variance, mode="sequential", **osla
            )
            if not extra.any():
                break
            k = k + extra
    elif allocation != "fixed":
        raise ValueError(f"allocation must be 'fixed', 'sequential' or 'planned', got {allocation!r}")
    estimate = shrinkage_baseline(_mean_of_first(rewards, k), prior_value, k, variance)
    return _outcome(rewards, k, estimate.baseline, true_mean, estimate.weight)
