r"""The V0.5 estimator: prior-shrinkage baselines and one-step look-ahead (OSLA) rollout allocation.

Pure functions on tensors, batched over prompts: numbers in, numbers out, no trainer state. Every formula of
V0.5 (Zhang et al., arXiv 2603.10848) that the trainer uses lives here, once.

Notation, per prompt (all on the reward scale unless said otherwise):

- rewards lie in a declared ``reward_range = (lo, hi)``; TRL's ``accuracy_reward`` gives 0/1, the paper uses -1/+1;
- ``mu``: the policy's true mean reward on the prompt, the quantity the baseline estimates;
- ``y_bar``: the empirical mean of ``k`` rollouts' rewards, unbiased for ``mu`` with variance ``sigma^2 / k``,
  where ``sigma^2`` is the variance of one reward (``noise_variance``);
- ``p``: the prior's success probability in [0, 1]; on the reward scale ``v = lo + p * (hi - lo)``.

**Shrinkage.** The baseline ``b(w) = w * y_bar + (1 - w) * v`` has

    MSE(w) = w^2 * sigma^2 / k + (1 - w)^2 * (mu - v)^2,

minimised at ``w* = B / (B + N)`` with ``B = (mu - v)^2`` (squared bias of the prior) and ``N = sigma^2 / k``
(noise of the mean), where ``MSE(w*) = B * N / (B + N) <= min(B, N)``. ``mu`` is unknown, but
``E[(y_bar - v)^2] = B + N``, so ``B_hat = max(0, (y_bar - v)^2 - N)`` is the positive-part (James-Stein style)
estimate of ``B``. Its positive part is a hypothesis test: under ``H0: mu = v`` the statistic
``(y_bar - v)^2 / N`` has mean 1, and ``B_hat > 0`` exactly when the rollouts deviate from the prior by more than
one standard error. While they do not, ``w = 0`` and the prior is kept whole; once they do, the prior is
down-weighted in proportion to the evidence against it.

**One-step look-ahead.** Holding ``B`` fixed, ``m(k) = B * sigma^2 / (B * k + sigma^2)`` is the estimated MSE after
``k`` rollouts, and one more rollout lowers it by

    gain(k) = m(k) - m(k + 1) = B^2 * sigma^2 / ((B * k + sigma^2) * (B * (k + 1) + sigma^2)),

which falls as ``k`` grows (and is ``sigma^2 / (k (k + 1))`` for a fully rejected prior, ``B -> inf``). A prompt draws
one more rollout iff ``k < k_max`` and ``gain(k) > rollout_cost * ((hi - lo) / 2)^2``: the cost of a rollout is
measured in units of the worst-case variance of one reward, so the rule does not depend on the reward scale. With
the paper's settings (``k_init = 4``, ``k_max = 16``, ``rollout_cost = 1/256``) a fully rejected prior on the
worst-case noise model draws up to exactly 16: ``gain(15) = 1/240 > 1/256 >= gain(16)`` on a +-1 scale.

**Reward scale.** Every result is equivariant under an affine change ``r -> a * r + c`` of the rewards (``a > 0``):
baselines move with the rewards, weights and rollout counts do not change, MSEs scale by ``a^2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import torch

__all__ = [
    "NOISE_MODELS",
    "PRIOR_NOISE_FLOOR",
    "GroupStatistics",
    "ShrinkageBaseline",
    "group_statistics",
    "osla_extra_rollouts",
    "osla_gain",
    "prior_to_reward_scale",
    "reward_noise_variance",
    "shrinkage_baseline",
    "validate_reward_range",
]

NoiseModel = Literal["worst_case", "prior"]
NOISE_MODELS: tuple[str, ...] = ("worst_case", "prior")

#: Floor of the Bernoulli variance ``p * (1 - p)`` in the ``"prior"`` noise model (as a fraction of
#: ``(hi - lo)^2``). A prior of exactly 0 or 1 would otherwise claim zero noise, so that any deviation at all
#: rejects it and ``0 / 0`` appears where none does; ``1e-3`` is the variance of a prior of about 0.001.
PRIOR_NOISE_FLOOR = 1e-3

TensorLike = torch.Tensor | float | int | Sequence[float]


class ShrinkageBaseline(NamedTuple):
    """Per-prompt result of :func:`shrinkage_baseline`, each of shape ``[num_prompts]``."""

    baseline: torch.Tensor
    """``w * y_bar + (1 - w) * v``, on the reward scale."""
    weight: torch.Tensor
    """``w`` in [0, 1], the weight of the empirical mean; ``w > 0`` means the prior was (partly) rejected."""
    bias_sq: torch.Tensor
    """``B_hat = max(0, (y_bar - v)^2 - sigma^2 / k)``; ``inf`` where the prior is NaN (no opinion)."""
    mse: torch.Tensor
    """Estimated MSE of the baseline, ``B_hat * N / (B_hat + N)``; ``N = sigma^2 / k`` where the prior is NaN."""


class GroupStatistics(NamedTuple):
    """Per-group result of :func:`group_statistics`, each of shape ``[num_groups]``."""

    count: torch.Tensor
    """Number of rewards in the group (int64)."""
    mean: torch.Tensor
    """Mean reward, GRPO's baseline; NaN for an empty group."""
    std: torch.Tensor
    """Unbiased standard deviation (as ``torch.std``); 0 for groups of fewer than two rewards."""


# ----------------------------------------------------------------------------------------------------------------
# Validation helpers: bad input fails here, naming the argument and the allowed range.
# ----------------------------------------------------------------------------------------------------------------


def validate_reward_range(reward_range: Sequence[float]) -> tuple[float, float]:
    """Return ``(lo, hi)`` as floats, or raise ``ValueError`` unless it is two finite numbers with ``lo < hi``."""
    try:
        lo, hi = (float(x) for x in reward_range)
    except (TypeError, ValueError) as err:
        raise ValueError(f"reward_range must be a pair (lo, hi) of numbers, got {reward_range!r}") from err
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise ValueError(f"reward_range must satisfy lo < hi (both finite), got ({lo}, {hi})")
    return lo, hi


def _as_float(x: TensorLike, name: str) -> torch.Tensor:
    # Tensors keep their floating dtype; Python numbers and integer tensors become float64, so that a scalar
    # argument never rounds a float64 batch through float32.
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x, dtype=torch.float64)
    if not t.is_floating_point():
        t = t.to(torch.float64)
    if t.dim() > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D tensor over prompts, got shape {tuple(t.shape)}")
    return t


def _check_within(t: torch.Tensor, lo: float, hi: float, name: str, *, allow_nan: bool = False) -> None:
    bad = (t < lo) | (t > hi)
    bad = bad if allow_nan else bad | torch.isnan(t)
    if bad.any():
        first = t[bad].flatten()[0].item()
        nan_note = " (NaN allowed: no opinion)" if allow_nan else ""
        raise ValueError(f"{name} must lie in [{lo}, {hi}]{nan_note}; got {first} ({int(bad.sum())} value(s) out)")


def _check_num_rollouts(k: torch.Tensor) -> torch.Tensor:
    if k.is_floating_point() and not torch.equal(k, k.round()):
        raise ValueError("num_rollouts must hold whole numbers of rollouts")
    k = k.long()
    if (k < 1).any():
        raise ValueError(
            f"num_rollouts must be >= 1 (k_init, the `num_generations` of the first stage); got {int(k.min())}"
        )
    return k


# ----------------------------------------------------------------------------------------------------------------
# Reward scale and noise models
# ----------------------------------------------------------------------------------------------------------------


def prior_to_reward_scale(prior_prob: TensorLike, reward_range: Sequence[float]) -> torch.Tensor:
    """Map success probabilities ``p`` in [0, 1] (NaN: no opinion) to ``v = lo + p * (hi - lo)``."""
    lo, hi = validate_reward_range(reward_range)
    p = _as_float(prior_prob, "prior_prob")
    _check_within(p, 0.0, 1.0, "prior_prob", allow_nan=True)
    return lo + p * (hi - lo)


def reward_noise_variance(
    prior_prob: TensorLike, reward_range: Sequence[float], noise_model: NoiseModel = "worst_case"
) -> torch.Tensor:
    r"""Variance ``sigma^2`` of one reward, per prompt, under a noise model.

    - ``"worst_case"``: ``((hi - lo) / 2)^2``, the largest variance of any reward in the range (the paper's bound,
      1 on a +-1 scale); it does not depend on the prior.
    - ``"prior"``: ``(hi - lo)^2 * max(p * (1 - p), PRIOR_NOISE_FLOOR)``, the variance of a binary reward under
      ``H0``: the prior is right. Where the prior is NaN there is no ``H0``, and the worst case is used.

    Returns a tensor shaped like ``prior_prob``.
    """
    lo, hi = validate_reward_range(reward_range)
    p = _as_float(prior_prob, "prior_prob")
    _check_within(p, 0.0, 1.0, "prior_prob", allow_nan=True)
    worst_case = torch.full_like(p, ((hi - lo) / 2) ** 2)
    if noise_model == "worst_case":
        return worst_case
    if noise_model == "prior":
        bernoulli = (p * (1 - p)).clamp(min=PRIOR_NOISE_FLOOR) * (hi - lo) ** 2
        return torch.where(torch.isnan(p), worst_case, bernoulli)
    raise ValueError(f"noise_model must be one of {NOISE_MODELS}, got {noise_model!r}")


# ----------------------------------------------------------------------------------------------------------------
# Shrinkage and OSLA
# ----------------------------------------------------------------------------------------------------------------


def shrinkage_baseline(
    empirical_mean: TensorLike,
    prior_value: TensorLike,
    num_rollouts: TensorLike,
    noise_variance: TensorLike,
) -> ShrinkageBaseline:
    r"""MSE-minimising blend of the empirical mean and the prior, with a positive-part bias test.

    With ``N = noise_variance / num_rollouts`` (variance of the empirical mean):

        bias_sq  = max(0, (empirical_mean - prior_value)^2 - N)
        weight   = bias_sq / (bias_sq + N)            (0 where bias_sq = 0)
        baseline = weight * empirical_mean + (1 - weight) * prior_value
        mse      = bias_sq * N / (bias_sq + N)         (0 where bias_sq = 0)

    See the module docstring for the derivation. A NaN ``prior_value`` means "no opinion": the baseline is the
    empirical mean (plain GRPO), ``weight = 1``, ``bias_sq = inf`` and ``mse = N``, the limit ``bias_sq -> inf``.

    Args:
        empirical_mean: ``[P]`` mean reward of each prompt's rollouts.
        prior_value: ``[P]`` prior on the reward scale (see :func:`prior_to_reward_scale`), NaN for no opinion.
        num_rollouts: ``[P]`` or scalar, rollouts behind each mean (``>= 1``).
        noise_variance: ``[P]`` or scalar, variance of one reward (``>= 0``, see :func:`reward_noise_variance`).

    Returns:
        :class:`ShrinkageBaseline` of ``[P]`` tensors (broadcast shape of the inputs).
    """
    mean = _as_float(empirical_mean, "empirical_mean")
    if torch.isnan(mean).any():
        raise ValueError("empirical_mean must not be NaN")
    prior = _as_float(prior_value, "prior_value").to(mean.dtype)
    k = _check_num_rollouts(torch.as_tensor(num_rollouts))
    variance = _as_float(noise_variance, "noise_variance").to(mean.dtype)
    if torch.isnan(variance).any() or (variance < 0).any():
        raise ValueError("noise_variance must be >= 0 (the variance of one reward)")

    noise = variance / k.to(mean.dtype)
    mean, prior, noise = torch.broadcast_tensors(mean, prior, noise)
    no_opinion = torch.isnan(prior)
    bias_sq = ((mean - prior) ** 2 - noise).clamp(min=0)
    total = bias_sq + noise
    rejected = bias_sq > 0
    safe_total = torch.where(rejected, total, torch.ones_like(total))
    weight = torch.where(rejected, bias_sq / safe_total, torch.zeros_like(total))
    mse = torch.where(rejected, bias_sq * noise / safe_total, torch.zeros_like(total))
    baseline = weight * mean + (1 - weight) * torch.where(no_opinion, mean, prior)

    return ShrinkageBaseline(
        baseline=torch.where(no_opinion, mean, baseline),
        weight=torch.where(no_opinion, torch.ones_like(weight), weight),
        bias_sq=torch.where(no_opinion, torch.full_like(bias_sq, math.inf), bias_sq),
        mse=torch.where(no_opinion, noise, mse),
    )


def osla_gain(bias_sq: TensorLike, noise_variance: TensorLike, num_rollouts: TensorLike) -> torch.Tensor:
    r"""Drop in estimated MSE from one more rollout, holding the squared bias fixed.

        gain(k) = B^2 * sigma^2 / ((B * k + sigma^2) * (B * (k + 1) + sigma^2))

    with ``B = bias_sq`` and ``sigma^2 = noise_variance``; ``sigma^2 / (k * (k + 1))`` where ``B = inf`` and 0 where
    ``B = 0`` (an accepted prior gains nothing from more rollouts). Decreasing in ``k``. Shapes broadcast.
    """
    b = _as_float(bias_sq, "bias_sq")
    s = _as_float(noise_variance, "noise_variance").to(b.dtype)
    k = _check_num_rollouts(torch.as_tensor(num_rollouts)).to(b.dtype)
    b, s, k = torch.broadcast_tensors(b, s, k)
    infinite = torch.isinf(b)
    finite_b = torch.where(infinite, torch.zeros_like(b), b)
    denom = (finite_b * k + s) * (finite_b * (k + 1) + s)
    positive = (finite_b > 0) & (s > 0)
    gain = torch.where(positive, finite_b**2 * s / torch.where(positive, denom, torch.ones_like(denom)), 0.0)
    return torch.where(infinite, s / (k * (k + 1)), gain)


def osla_extra_rollouts(
    empirical_mean: TensorLike,
    prior_value: TensorLike,
    num_rollouts: TensorLike,
    noise_variance: TensorLike,
    *,
    max_rollouts: int,
    rollout_cost: float,
    reward_range: Sequence[float],
    mode: Literal["planned", "sequential"] = "planned",
    budget: int | None = None,
) -> torch.Tensor:
    r"""How many more rollouts each prompt should draw under the one-step look-ahead rule.

    The rule (see the module docstring): draw one more iff ``k < max_rollouts`` and
    ``osla_gain(B_hat, sigma^2, k) > rollout_cost * ((hi - lo) / 2)^2``, with ``B_hat`` from
    :func:`shrinkage_baseline` at the current state.

    - ``mode="sequential"``: one step of the rule, at most 1 per prompt; call again once the new rollouts are in.
    - ``mode="planned"``: the whole plan in one go: the smallest ``k' >= k`` at which the rule stops with ``B_hat``
      held fixed, capped at ``max_rollouts``; returns ``k' - k``. Since ``gain`` falls with ``k``, this is the rule
      iterated without new data, and one generation call serves every prompt's extra rollouts.

    A NaN prior (no opinion) draws nothing more: that prompt is plain GRPO with ``k`` rollouts.

    Args:
        empirical_mean, prior_value, num_rollouts, noise_variance: as in :func:`shrinkage_baseline`, ``[P]``.
        max_rollouts: ``k_max``, the most rollouts any prompt may reach (``>=`` every ``num_rollouts``).
        rollout_cost: cost of one rollout in units of the worst-case variance of one reward (``>= 0``).
        reward_range: ``(lo, hi)``; ``empirical_mean`` and ``prior_value`` must lie in it.
        mode: ``"planned"`` or ``"sequential"``.
        budget: optional cap on the total extra rollouts of the batch; the largest marginal gains are served
            first (ties: earlier steps, then lower prompt index).

    Returns:
        ``[P]`` int64 tensor of extra rollouts per prompt.
    """
    lo, hi = validate_reward_range(reward_range)
    if mode not in ("planned", "sequential"):
        raise ValueError(f"mode must be 'planned' or 'sequential', got {mode!r}")
    if not (isinstance(rollout_cost, (int, float)) and math.isfinite(rollout_cost) and rollout_cost >= 0):
        raise ValueError(f"rollout_cost must be a finite number >= 0, got {rollout_cost!r}")
    if budget is not None and (int(budget) != budget or budget < 0):
        raise ValueError(f"budget must be None or an integer >= 0, got {budget!r}")
    k = _check_num_rollouts(torch.as_tensor(num_rollouts))
    most = int(k.max()) if k.numel() else 1
    if int(max_rollouts) != max_rollouts or max_rollouts < most:
        raise ValueError(
            f"max_rollouts (k_max) must be an integer >= num_rollouts (k_init); got {max_rollouts} < {most}"
        )
    mean = _as_float(empirical_mean, "empirical_mean")
    _check_within(mean, lo, hi, "empirical_mean (rewards outside reward_range)")
    _check_within(_as_float(prior_value, "prior_value"), lo, hi, "prior_value", allow_nan=True)

    estimate = shrinkage_baseline(mean, prior_value, k, noise_variance)
    bias_sq = estimate.bias_sq
    has_opinion = torch.isfinite(bias_sq)
    variance, k = torch.broadcast_tensors(
        _as_float(noise_variance, "noise_variance").to(bias_sq.dtype), k.expand_as(bias_sq)
    )
    threshold = rollout_cost * ((hi - lo) / 2) ** 2

    if bias_sq.numel() == 0:
        return torch.zeros_like(k)
    max_steps = 1 if mode == "sequential" else int(max_rollouts) - int(k.min())
    extra = torch.zeros_like(k)
    active = has_opinion
    step_gains = []  # gain of the j-th extra rollout of each prompt, -inf where the rule does not draw it
    for _ in range(max_steps):
        gain = osla_gain(bias_sq, variance, k + extra)
        draw = active & (k + extra < max_rollouts) & (gain > threshold)
        if not draw.any():
            break
        step_gains.append(torch.where(draw, gain, -math.inf))
        extra = extra + draw.long()
        active = draw

    if budget is None or int(extra.sum()) <= budget:
        return extra
    # Serve the largest marginal gains first. Each prompt's gains fall with each step, so the chosen set is a
    # prefix of every prompt's plan, and counting the chosen entries per prompt gives the allocation.
    gains = torch.stack(step_gains)  # [steps, P]
    order = torch.sort(gains.flatten(), descending=True, stable=True).indices[: int(budget)]
    prompt_of = order % gains.shape[1]
    return torch.bincount(prompt_of, minlength=gains.shape[1]).to(extra.dtype)


# ----------------------------------------------------------------------------------------------------------------
# Group statistics for ragged groups
# ----------------------------------------------------------------------------------------------------------------


def group_statistics(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    num_groups: int | None = None,
    *,
    reward_range: Sequence[float] | None = None,
) -> GroupStatistics:
    r"""Per-group count, mean and standard deviation for groups of any size, from flat tensors.

    ``count_g = sum_i [g_i = g]``, ``mean_g = sum_i [g_i = g] r_i / count_g`` and
    ``std_g = sqrt(sum_i [g_i = g] (r_i - mean_g)^2 / (count_g - 1))``, with scatter-adds (no loop over groups).

    Args:
        rewards: ``[N]`` one reward per completion.
        group_index: ``[N]`` int, the group (prompt) of each completion, in ``[0, num_groups)``.
        num_groups: number of groups; default ``max(group_index) + 1``.
        reward_range: when given, every reward must lie in it (``ValueError`` otherwise).

    Returns:
        :class:`GroupStatistics` of ``[num_groups]`` tensors.
    """
    rewards = _as_float(rewards, "rewards")
    group_index = torch.as_tensor(group_index, device=rewards.device)
    if rewards.shape != group_index.shape or rewards.dim() != 1:
        raise ValueError(
            f"rewards and group_index must be 1-D of one length, got {tuple(rewards.shape)} and "
            f"{tuple(group_index.shape)}"
        )
    if group_index.is_floating_point():
        raise ValueError("group_index must be an integer tensor")
    if reward_range is not None:
        lo, hi = validate_reward_range(reward_range)
        _check_within(rewards, lo, hi, "rewards (declare the true range in reward_range)")
    elif torch.isnan(rewards).any():
        raise ValueError("rewards must not be NaN")
    if num_groups is None:
        num_groups = int(group_index.max()) + 1 if group_index.numel() else 0
    if group_index.numel() and (int(group_index.min()) < 0 or int(group_index.max()) >= num_groups):
        raise ValueError(f"group_index must lie in [0, num_groups={num_groups})")

    count = torch.bincount(group_index, minlength=num_groups)
    sums = torch.zeros(num_groups, dtype=rewards.dtype, device=rewards.device).index_add_(0, group_index, rewards)
    mean = sums / count.to(rewards.dtype)  # NaN where count == 0
    squared_dev = (rewards - mean[group_index]) ** 2
    sq_sums = torch.zeros_like(sums).index_add_(0, group_index, squared_dev)
    dof = (count - 1).clamp(min=1).to(rewards.dtype)
    std = torch.where(count > 1, (sq_sums / dof).sqrt(), torch.zeros_like(sums))
    return GroupStatistics(count=count, mean=mean, std=std)
