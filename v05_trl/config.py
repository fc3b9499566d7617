"""``V05GRPOConfig``: TRL's ``GRPOConfig`` plus the settings of V0.5's staged rollouts and shrinkage baseline."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trl import GRPOConfig

from .estimator import NOISE_MODELS, validate_reward_range

ADVANTAGE_SCALES = ("none", "batch", "group")
#: TRL's booleans for scale_rewards (True: "group", False: "none"), accepted for advantage_scale too.
_BOOLEAN_SCALES = {True: "group", False: "none"}
OSLA_MODES = ("planned", "sequential")


@dataclass
class V05GRPOConfig(GRPOConfig):
    r"""Configuration for :class:`~v05_trl.V05GRPOTrainer`.

    Every ``GRPOConfig`` field keeps its meaning, with two refinements: ``num_generations`` is the number of rollouts
    of the *first* stage (``k_init``), and the scaling of advantages is set by ``advantage_scale`` (TRL's
    ``scale_rewards`` semantics, applied to reward minus the V0.5 baseline).

    Per generation batch the trainer asks the value prior for each prompt's success probability, draws
    ``num_generations`` rollouts per prompt, then up to ``max_rollout_rounds`` more rounds of rollouts for the
    prompts whose one-step look-ahead (OSLA) gain exceeds ``rollout_cost``, never beyond ``max_num_generations``
    per prompt; the baseline is the shrinkage blend of the prior and the prompt's mean reward (see
    :mod:`v05_trl.estimator`).
    """

    num_generations: int | None = field(
        default=4,
        metadata={"help": "Rollouts per prompt in the first stage (k_init). More are drawn only where OSLA asks."},
    )
    max_num_generations: int = field(
        default=16,
        metadata={"help": "Most rollouts any prompt may reach in one generation batch (k_max), >= num_generations."},
    )
    rollout_cost: float = field(
        default=1 / 256,
        metadata={
            "help": "Cost of one extra rollout, in units of the worst-case variance of one reward. OSLA draws one "
            "more rollout while it lowers the estimated baseline MSE by more than this. 0 draws up to "
            "max_num_generations wherever the prior is rejected."
        },
    )
    noise_model: str = field(
        default="worst_case",
        metadata={
            "help": "Variance of one reward: 'worst_case' (((hi - lo) / 2)^2, the paper's bound) or 'prior' "
            "(Bernoulli variance at the prior's probability)."
        },
    )
    reward_range: list[float] = field(
        default_factory=lambda: [0.0, 1.0],
        metadata={
            "help": "Range [lo, hi] of the total (weighted) reward. The prior's probability p maps to the reward "
            "lo + p * (hi - lo); a reward outside the range is an error."
        },
    )
    success_threshold: float | None = field(
        default=None,
        metadata={
            "help": "A rollout counts as a success for the prior's pass rate when its reward is >= this. Default: "
            "the middle of reward_range."
        },
    )
    osla_mode: str = field(
        default="planned",
        metadata={
            "help": "'planned': each round draws every rollout the OSLA rule plans from the current rewards; "
            "'sequential': each round draws at most one more rollout per prompt, then re-tests."
        },
    )
    max_rollout_rounds: int = field(
        default=1,
        metadata={"help": "Most extra generation calls per generation batch after the first stage (0: none)."},
    )
    rollout_budget: int | None = field(
        default=None,
        metadata={
            "help": "Optional cap on the extra rollouts of one generation batch (all processes together). The "
            "largest OSLA gains are served first."
        },
    )
    value_prior: str = field(
        default="history",
        metadata={
            "help": "Value prior spec: 'history', 'v0', 'v0:<hub id or folder>', 'embedding[:<model>]', "
            "'constant:<p>', 'column:<dataset column>', 'a+b' (first with an opinion), or 'none' (plain GRPO "
            "baseline). A ValuePrior object passed to the trainer overrides it."
        },
    )
    prior_context_size: int = field(
        default=256,
        metadata={"help": "In-context priors (v0, embedding): most recent (prompt, pass rate) pairs kept."},
    )
    prior_min_context: int = field(
        default=64,
        metadata={"help": "In-context priors: pairs needed before they give an opinion (none before)."},
    )
    advantage_scale: str = field(
        default="none",
        metadata={
            "help": "Scaling of reward minus baseline, with TRL's scale_rewards semantics: 'none', 'group' (divide "
            "by the prompt's reward std; a group with zero spread keeps its unscaled advantage) or 'batch'."
        },
    )
    scale_rewards: str | None = field(
        default=None,
        metadata={"help": "Set by advantage_scale (TRL's field, kept in step with it). Use advantage_scale."},
    )

    def __post_init__(self):
        self.advantage_scale = _BOOLEAN_SCALES.get(self.advantage_scale, self.advantage_scale)
        if self.advantage_scale not in ADVANTAGE_SCALES:
            raise ValueError(f"advantage_scale must be one of {ADVANTAGE_SCALES}, got {self.advantage_scale!r}")
        scale_rewards = _BOOLEAN_SCALES.get(self.scale_rewards, self.scale_rewards)
        if scale_rewards is not None and scale_rewards != self.advantage_scale:
            raise ValueError(
                f"V05GRPOConfig scales advantages by advantage_scale ({self.advantage_scale!r}); got "
                f"scale_rewards={self.scale_rewards!r}. Set advantage_scale={scale_rewards!r} instead."
            )
        self.scale_rewards = self.advantage_scale
        super().__post_init__()

        if self.max_num_generations < self.num_generations:
            raise ValueError(
                f"max_num_generations ({self.max_num_generations}) must be >= num_generations "
                f"({self.num_generations}), the rollouts of the first stage."
            )
        if not (isinstance(self.rollout_cost, (int, float)) and math.isfinite(self.rollout_cost)):
            raise ValueError(f"rollout_cost must be a finite number >= 0, got {self.rollout_cost!r}")
        if self.rollout_cost < 0:
            raise ValueError(f"rollout_cost must be >= 0, got {self.rollout_cost}")
        if self.noise_model not in NOISE_MODELS:
            raise ValueError(f"noise_model must be one of {NOISE_MODELS}, got {self.noise_model!r}")
        lo, hi = validate_reward_range(self.reward_range)
        self.reward_range = [lo, hi]
        if self.success_threshold is None:
            self.success_threshold = (lo + hi) / 2
        elif not lo <= self.success_threshold <= hi:
            raise ValueError(
                f"success_threshold ({self.success_threshold}) must lie in reward_range [{lo}, {hi}]; a reward >= it "
                "counts as a success."
            )
        if self.osla_mode not in OSLA_MODES:
            raise ValueError(f"osla_mode must be one of {OSLA_MODES}, got {self.osla_mode!r}")
        if self.max_rollout_rounds < 0:
            raise ValueError(f"max_rollout_rounds must be >= 0, got {self.max_rollout_rounds}")
        if self.rollout_budget is not None and self.rollout_budget < 0:
            raise ValueError(f"rollout_budget must be None or >= 0, got {self.rollout_budget}")
        if self.prior_context_size < 1 or not 0 <= self.prior_min_context <= self.prior_context_size:
            raise ValueError(
                "prior_context_size must be >= 1 and prior_min_context in [0, prior_context_size]; got "
                f"{self.prior_context_size} and {self.prior_min_context}"
            )
        if not isinstance(self.value_prior, str) or not self.value_prior.strip():
            raise ValueError("value_prior must be a spec string such as 'history', 'v0' or 'none'")
        if self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                "V05GRPOConfig needs multi_objective_aggregation='sum_then_normalize': the V0.5 baseline is "
                "estimated on the total reward, whose range is reward_range."
            )
        rows_per_process = self.per_device_train_batch_size * self.steps_per_generation
        if rows_per_process % self.num_generations != 0:
            raise ValueError(
                f"per_device_train_batch_size * steps_per_generation ({rows_per_process}) must be divisible by "
                f"num_generations ({self.num_generations}), so that each prompt's rollouts stay on one process "
                "(its extra rollouts are drawn there)."
            )
