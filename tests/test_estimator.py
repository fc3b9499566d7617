import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from v05_trl import (
    PRIOR_NOISE_FLOOR,
    group_statistics,
    osla_extra_rollouts,
    osla_gain,
    prior_to_reward_scale,
    reward_noise_variance,
    shrinkage_baseline,
)

PAPER = {"max_rollouts": 16, "rollout_cost": 1 / 256, "reward_range": (0.0, 1.0)}
unit = st.floats(0.0, 1.0, allow_nan=False)
rollouts = st.integers(1, 16)
variances = st.floats(1e-3, 1.0)
settings.register_profile("v05", max_examples=150, deadline=None, derandomize=True)
settings.load_profile("v05")

TOL = 1e-9


def _t(*xs):
    return torch.tensor(xs, dtype=torch.float64)


# ---------------------------------------------------------------------------------------------------------------
# Shrinkage
# ---------------------------------------------------------------------------------------------------------------


@given(mean=unit, prior=unit, k=rollouts, var=variances)
def test_shrinkage_weight_baseline_and_mse_bounds(mean, prior, k, var):
    est = shrinkage_baseline(_t(mean), _t(prior), k, var)
    noise = var / k
    w, b = est.weight.item(), est.baseline.item()
    assert 0.0 <= w <= 1.0
    assert min(mean, prior) - TOL <= b <= max(mean, prior) + TOL
    assert est.mse.item() <= min(noise, est.bias_sq.item()) + TOL
    assert b == pytest.approx(w * mean + (1 - w) * prior, abs=1e-12)


@given(mean=unit, prior=unit, k=rollouts, var=variances)
def test_prior_kept_whole_within_one_standard_error(mean, prior, k, var):
    est = shrinkage_baseline(_t(mean), _t(prior), k, var)
    within = abs(mean - prior) <= math.sqrt(var / k)
    assert (est.weight.item() == 0.0) == within
    if within:
        assert est.baseline.item() == prior and est.mse.item() == 0.0 and est.bias_sq.item() == 0.0


def test_weight_grows_to_one_with_the_gap():
    gaps = torch.linspace(0, 100, 401, dtype=torch.float64)
    est = shrinkage_baseline(gaps, torch.zeros_like(gaps), 4, 1.0)
    assert torch.all(est.weight[1:] >= est.weight[:-1])
    assert est.weight[-1] > 0.9999
    assert est.weight[gaps > 0.5].min() > 0  # one standard error is 0.5 here


def test_shrinkage_matches_the_formulas_on_a_worked_example():
    # mean 1, prior 0, k 4, sigma^2 1/4: N = 1/16, B = 1 - 1/16 = 15/16, w = 15/16, mse = (15/16)(1/16) / 1
    est = shrinkage_baseline(_t(1.0), _t(0.0), 4, 0.25)
    assert est.bias_sq.item() == pytest.approx(15 / 16)
    assert est.weight.item() == pytest.approx(15 / 16)
    assert est.baseline.item() == pytest.approx(15 / 16)
    assert est.mse.item() == pytest.approx(15 / 256)


@given(mean=unit, k=rollouts, var=variances)
def test_nan_prior_is_plain_grpo(mean, k, var):
    est = shrinkage_baseline(_t(mean), _t(math.nan), k, var)
    assert est.baseline.item() == mean and est.weight.item() == 1.0
    assert math.isinf(est.bias_sq.item()) and est.mse.item() == pytest.approx(var / k)
    extra = osla_extra_rollouts(_t(mean), _t(math.nan), k, var, **PAPER)
    assert extra.item() == 0


@given(
    mean=unit,
    prior=unit,
    k=st.integers(1, 15),
    var_fraction=st.floats(0.05, 1.0),
    scale=st.floats(0.1, 10.0),
    shift=st.floats(-5.0, 5.0),
    mode=st.sampled_from(["planned", "sequential"]),
)
def test_affine_change_of_reward_scale(mean, prior, k, var_fraction, scale, shift, mode):
    var = var_fraction * 0.25  # at most the worst case on (0, 1)
    base = shrinkage_baseline(_t(mean), _t(prior), k, var)
    moved = shrinkage_baseline(_t(scale * mean + shift), _t(scale * prior + shift), k, scale**2 * var)
    assert moved.weight.item() == pytest.approx(base.weight.item(), abs=1e-9)
    assert moved.baseline.item() == pytest.approx(scale * base.baseline.item() + shift, abs=1e-9)
    assert moved.mse.item() == pytest.approx(scale**2 * base.mse.item(), rel=1e-9, abs=1e-12)
    extra = osla_extra_rollouts(_t(mean), _t(prior), k, var, mode=mode, **PAPER)
    moved_extra = osla_extra_rollouts(
        _t(scale * mean + shift),
        _t(scale * prior + shift),
        k,
        scale**2 * var,
        mode=mode,
        max_rollouts=16,
        rollout_cost=1 / 256,
        reward_range=(shift, scale + shift),
    )
    assert torch.equal(extra, moved_extra)


def test_paper_scale_and_unit_scale_agree():
    p = _t(0.1, 0.5, 0.9, math.nan)
    for noise_model in ("worst_case", "prior"):
        on_unit = reward_noise_variance(p, (0, 1), noise_model)
        on_pm1 = reward_noise_variance(p, (-1, 1), noise_model)
        assert torch.allclose(on_pm1, 4 * on_unit)
    assert torch.allclose(prior_to_reward_scale(p, (-1, 1)), 2 * prior_to_reward_scale(p, (0, 1)) - 1, equal_nan=True)


def test_noise_models():
    p = _t(0.0, 0.25, 0.5, 1.0, math.nan)
    assert torch.allclose(reward_noise_variance(p, (-1, 1), "worst_case"), torch.ones(5, dtype=torch.float64))
    prior_var = reward_noise_variance(p, (0, 1), "prior")
    assert torch.allclose(prior_var, _t(PRIOR_NOISE_FLOOR, 0.1875, 0.25, PRIOR_NOISE_FLOOR, 0.25))


# ---------------------------------------------------------------------------------------------------------------
# OSLA
# ---------------------------------------------------------------------------------------------------------------


def _mse_at(bias_sq, var, k):
    noise = var / k
    return bias_sq * noise / (bias_sq + noise) if bias_sq > 0 else 0.0


@given(bias_sq=st.floats(0.0, 4.0), var=variances, k=rollouts)
def test_gain_is_the_drop_in_mse(bias_sq, var, k):
    gain = osla_gain(_t(bias_sq), var, k).item()
    assert gain == pytest.approx(_mse_at(bias_sq, var, k) - _mse_at(bias_sq, var, k + 1), rel=1e-9, abs=1e-15)
    assert osla_gain(_t(bias_sq), var, k + 1).item() <= gain


def test_gain_of_a_fully_rejected_prior():
    k = torch.arange(1, 17)
    assert torch.allclose(osla_gain(_t(math.inf), 1.0, k), 1.0 / (k * (k + 1)).double())
    assert torch.allclose(osla_gain(_t(1e12), 1.0, k), osla_gain(_t(math.inf), 1.0, k))


@given(mean=unit, prior=unit, k=rollouts, var=variances, mode=st.sampled_from(["planned", "sequential"]))
def test_osla_never_exceeds_k_max_and_stops_when_the_prior_is_accepted(mean, prior, k, var, mode):
    extra = osla_extra_rollouts(_t(mean), _t(prior), k, var, mode=mode, **PAPER).item()
    assert 0 <= k + extra <= 16
    if mode == "sequential":
        assert extra <= 1
    if shrinkage_baseline(_t(mean), _t(prior), k, var).weight.item() == 0:
        assert extra == 0


@pytest.mark.parametrize("reward_range", [(0.0, 1.0), (-1.0, 1.0)])
def test_rejected_prior_runs_from_4_to_exactly_16_with_paper_defaults(reward_range):
    lo, hi = reward_range
    worst_case = reward_noise_variance(_t(0.0), reward_range, "worst_case")
    # All four rollouts succeed while the prior says certain failure: the strongest possible rejection.
    args = (_t(hi), _t(lo), 4, worst_case)
    assert osla_extra_rollouts(*args, max_rollouts=16, rollout_cost=1 / 256, reward_range=reward_range).item() == 12
    # The rule itself stops at 16, not just the cap: with a larger k_max it still stops there.
    assert osla_extra_rollouts(*args, max_rollouts=64, rollout_cost=1 / 256, reward_range=reward_range).item() == 12
    # Sequentially, with the state unchanged, one rollout at a time up to 16.
    k = 4
    while osla_extra_rollouts(
        *args[:2], k, worst_case, mode="sequential", max_rollouts=16, rollout_cost=1 / 256, reward_range=reward_range
    ).item():
        k += 1
    assert k == 16


@given(
    bias_sq=st.floats(1e-4, 2.0),
    prior=st.floats(0.3, 0.7),
    k=st.integers(1, 12),
    var=st.floats(0.01, 0.25),
    sign=st.sampled_from([-1.0, 1.0]),
)
def test_planned_equals_repeated_sequential_steps_when_the_state_does_not_change(bias_sq, prior, k, var, sign):
    # "The state does not change": after each new rollout the empirical mean is such that the bias estimate is the
    # same, i.e. (mean_k - prior)^2 = bias_sq + var / k. Means may leave [0, 1], so declare a wide range.
    wide = {"max_rollouts": 16, "rollout_cost": 1 / 256, "reward_range": (-10.0, 10.0)}

    def mean_at(k_now):
        return prior + sign * math.sqrt(bias_sq + var / k_now)

    planned = osla_extra_rollouts(_t(mean_at(k)), _t(prior), k, var, mode="planned", **wide).item()
    k_now = k
    while osla_extra_rollouts(_t(mean_at(k_now)), _t(prior), k_now, var, mode="sequential", **wide).item():
        k_now += 1
    assert planned == k_now - k


def test_planned_is_the_closed_form_stopping_point():
    # gain(k) > c  <=>  k < K* = (sqrt(1 + 4 s / c) - 1) / 2 - s / B  (solve the quadratic in B k + s).
    torch.manual_seed(0)
    bias_sq = torch.rand(200, dtype=torch.float64) * 0.5 + 1e-3
    var, cost, k = 0.25, (1 / 256) * 0.25, 4
    k_star = (math.sqrt(1 + 4 * var / cost) - 1) / 2 - var / bias_sq
    expected = (torch.ceil(k_star).clamp(min=k, max=16) - k).long()
    prior = torch.zeros_like(bias_sq)
    mean = prior + (bias_sq + var / k).sqrt()  # at most 0.75: inside the declared (0, 1)
    extra = osla_extra_rollouts(mean, prior, k, var, **PAPER)
    assert torch.equal(extra, expected)


@given(
    data=st.lists(st.tuples(unit, unit, st.integers(1, 8)), min_size=1, max_size=12),
    budget=st.integers(0, 60),
    mode=st.sampled_from(["planned", "sequential"]),
)
def test_budget_serves_the_largest_gains_first(data, budget, mode):
    mean, prior, k = (torch.tensor(col, dtype=torch.float64) for col in zip(*data, strict=True))
    k = k.long()
    unlimited = osla_extra_rollouts(mean, prior, k, 0.25, mode=mode, **PAPER)
    capped = osla_extra_rollouts(mean, prior, k, 0.25, mode=mode, budget=budget, **PAPER)
    assert int(capped.sum()) == min(budget, int(unlimited.sum()))
    assert torch.all(capped <= unlimited)
    # Greedy by marginal gain, one rollout at a time, with the bias estimate held fixed.
    bias_sq = shrinkage_baseline(mean, prior, k, 0.25).bias_sq
    greedy = torch.zeros_like(k)
    for _ in range(min(budget, int(unlimited.sum()))):
        gains = torch.where(greedy < unlimited, osla_gain(bias_sq, 0.25, k + greedy), -math.inf)
        greedy[int(torch.argmax(gains))] += 1
    gains_served = osla_gain(bias_sq, 0.25, (k + capped - 1).clamp(min=1))[capped > 0]
    gains_left = osla_gain(bias_sq, 0.25, k + capped)[capped < unlimited]
    if gains_served.numel() and gains_left.numel():
        assert gains_served.min() >= gains_left.max() - 1e-15
    assert torch.allclose(
        sum(osla_gain(bias_sq, 0.25, k + j) * (j < capped) for j in range(16)),
        sum(osla_gain(bias_sq, 0.25, k + j) * (j < greedy) for j in range(16)),
    )


def test_an_empty_batch_needs_no_rollouts():
    empty = torch.empty(0, dtype=torch.float64)
    extra = osla_extra_rollouts(empty, empty, torch.empty(0, dtype=torch.long), 0.25, **PAPER)
    assert extra.shape == (0,)


def test_zero_cost_runs_rejected_prompts_to_k_max_and_huge_cost_draws_nothing():
    mean, prior = _t(1.0, 0.5), _t(0.0, 0.5)
    free = osla_extra_rollouts(mean, prior, 4, 0.25, max_rollouts=16, rollout_cost=0.0, reward_range=(0, 1))
    assert free.tolist() == [12, 0]
    dear = osla_extra_rollouts(mean, prior, 4, 0.25, max_rollouts=16, rollout_cost=1.0, reward_range=(0, 1))
    assert dear.tolist() == [0, 0]


# ---------------------------------------------------------------------------------------------------------------
# Group statistics
# ---------------------------------------------------------------------------------------------------------------


@given(sizes=st.lists(st.integers(1, 20), min_size=1, max_size=30), seed=st.integers(0, 2**16))
def test_group_statistics_equal_a_naive_loop(sizes, seed):
    generator = torch.Generator().manual_seed(seed)
    group_index = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    group_index = group_index[torch.randperm(len(group_index), generator=generator)]  # rows in any order
    rewards = torch.rand(len(group_index), generator=generator, dtype=torch.float64)
    stats = group_statistics(rewards, group_index, reward_range=(0, 1))
    for g, size in enumerate(sizes):
        members = rewards[group_index == g]
        assert stats.count[g].item() == size
        assert stats.mean[g].item() == pytest.approx(members.mean().item(), abs=1e-12)
        expected_std = members.std().item() if size > 1 else 0.0
        assert stats.std[g].item() == pytest.approx(expected_std, abs=1e-12)


def test_group_statistics_keep_empty_groups_visible():
    stats = group_statistics(_t(1.0, 0.0), torch.tensor([0, 2]), num_groups=4)
    assert stats.count.tolist() == [1, 0, 1, 0]
    assert math.isnan(stats.mean[1].item()) and stats.std.tolist() == [0.0, 0.0, 0.0, 0.0]


# ---------------------------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------------------------

OK = {"empirical_mean": _t(0.5), "prior_value": _t(0.5), "num_rollouts": 4, "noise_variance": 0.25}


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"num_rollouts": 0}, "num_rollouts must be >= 1"),
        ({"max_rollouts": 3}, "max_rollouts .* must be an integer >= num_rollouts"),
        ({"rollout_cost": -0.1}, "rollout_cost must be a finite number >= 0"),
        ({"reward_range": (1.0, 1.0)}, "reward_range must satisfy lo < hi"),
        ({"reward_range": (0.0,)}, "reward_range must be a pair"),
        ({"empirical_mean": _t(1.5)}, r"empirical_mean .*must lie in \[0.0, 1.0\]"),
        ({"prior_value": _t(-0.5)}, r"prior_value must lie in \[0.0, 1.0\]"),
        ({"noise_variance": -1.0}, "noise_variance must be >= 0"),
        ({"mode": "greedy"}, "mode must be 'planned' or 'sequential'"),
        ({"budget": -1}, "budget must be None or an integer >= 0"),
    ],
)
def test_osla_rejects_bad_input_naming_the_argument(change, match):
    kwargs = {**OK, **PAPER, **change}
    args = [kwargs.pop(name) for name in ("empirical_mean", "prior_value", "num_rollouts", "noise_variance")]
    with pytest.raises(ValueError, match=match):
        osla_extra_rollouts(*args, **kwargs)


def test_other_functions_reject_bad_input():
    with pytest.raises(ValueError, match=r"prior_prob must lie in \[0.0, 1.0\] \(NaN allowed"):
        prior_to_reward_scale(_t(1.2), (0, 1))
    with pytest.raises(ValueError, match="noise_model must be one of"):
        reward_noise_variance(_t(0.5), (0, 1), "gaussian")
    with pytest.raises(ValueError, match="rewards .*must lie in"):
        group_statistics(_t(0.0, 2.0), torch.tensor([0, 0]), reward_range=(0, 1))
    with pytest.raises(ValueError, match="rewards must not be NaN"):
        group_statistics(_t(0.0, math.nan), torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="group_index must lie in"):
        group_statistics(_t(0.0, 1.0), torch.tensor([0, 5]), num_groups=2)
    with pytest.raises(ValueError, match="num_rollouts must be >= 1"):
        shrinkage_baseline(_t(0.5), _t(0.5), 0, 0.25)
    with pytest.raises(ValueError, match="noise_variance must be >= 0"):
        shrinkage_baseline(_t(0.5), _t(0.5), 4, -0.25)
