"""``V05GRPOTrainer``: TRL's ``GRPOTrainer`` with V0.5's staged OSLA rollouts and prior-shrinkage advantages.

How it sits on TRL (mirrors TRL 1.16's ``GRPOTrainer``; no method of it is copied):

- ``_generate_and_score_completions`` (training only) calls the parent's method once per *stage*: first with the
  generation batch (``num_generations`` rollouts per prompt), then once per OSLA round with the rows that need more
  rollouts, with ``self.num_generations = 1`` for that call so the parent's ``view(-1, num_generations)`` holds.
  Each call generates, scores (every reward kind TRL supports), and computes old/reference/sampling
  log-probabilities and vLLM importance ratios for its own rows; ``_calculate_rewards`` is wrapped to keep the
  gathered rewards. The stages' outputs are merged (ids and masks padded to common lengths), the advantages are
  recomputed with the V0.5 baseline, and so are ``num_items_in_batch`` and the metrics the parent logged per call.
- Every process computes the OSLA plan for the whole generation batch from the gathered rewards, so all processes
  agree on it without extra communication. Each prompt's rollouts stay on its process. Round calls are padded to
  the largest process's row count (those completions are dropped), and the merged batch is padded with rows whose
  loss mask is zero so that every process has the same number of rows, a multiple of ``steps_per_generation``.
- ``_compute_loss`` rescales the loss types that average over rows (``grpo``, ``sapo``, ``dr_grpo``, ``luspo``)
  from the micro-batch's row count to its mean count of real rows, so padding rows change neither loss nor
  gradients; token-normalised types are padding-free by construction.

Evaluation runs the parent's plain GRPO path with ``num_generations_eval``.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import gather, gather_object
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOConfig, GRPOTrainer
from trl.trainer.utils import get_config_model_id

from .config import V05GRPOConfig
from .estimator import (
    group_statistics,
    osla_extra_rollouts,
    prior_to_reward_scale,
    reward_noise_variance,
    shrinkage_baseline,
)
from .model_card import render_model_card
from .priors import ValuePrior, load_prior

__all__ = ["V05GRPOTrainer"]

#: Loss types whose normaliser counts rows (see ``_compute_loss``).
ROW_NORMALISED_LOSSES = ("grpo", "sapo", "dr_grpo", "luspo")
#: File, in each checkpoint folder, holding the value prior's state.
PRIOR_STATE_FILE = "value_prior_state.json"
#: Keys of the generation output padded on the left (prompts); every other 2-D key is padded on the right.
_LEFT_PADDED = ("prompt_ids", "prompt_mask")
#: Keys that V0.5 cannot merge across stages (vision-language inputs).
_UNMERGEABLE = ("pixel_values", "image_grid_thw", "num_images", "num_tiles", "image_sizes", "spatial_shapes")
_MEAN_REAL_ROWS = "v05_mean_real_rows"


@dataclass
class _Stage:
    """One call of the parent's generation path: its output restricted to this process's real rows."""

    output: dict[str, Any]
    rewards: torch.Tensor  # [N] total reward of every process's real rows (rank-major), NaN if unscorable
    rewards_per_func: torch.Tensor  # [N, F]
    groups: torch.Tensor  # [N] global group index of each row
    local: slice  # this process's rows within the N
    call_rows: int  # rows per process in the call, padding included
    real_counts: list[int]  # real rows of each process
    prompt_lengths: list[int]  # this process's real rows
    completion_lengths: list[int]
    truncated: list[bool]


def _pad_width(tensor: torch.Tensor, width: int, value: float, left: bool) -> torch.Tensor:
    missing = width - tensor.size(1)
    if missing <= 0:
        return tensor
    fill = tensor.new_full((tensor.size(0), missing), value)
    return torch.cat([fill, tensor] if left else [tensor, fill], dim=1)


def _pad_value(key: str, pad_token_id: int) -> float:
    if key in ("prompt_ids", "completion_ids"):
        return pad_token_id
    if key in ("tool_mask", "importance_sampling_ratio"):
        return 1
    return 0


def merge_outputs(outputs: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Concatenate generation outputs along rows, padding 2-D tensors to the widest (prompts on the left)."""
    merged = {}
    for key, first in outputs[0].items():
        values = [out[key] for out in outputs]
        if not isinstance(first, torch.Tensor) or first.dim() == 0:
            merged[key] = first
        elif first.dim() == 1:
            merged[key] = torch.cat(values)
        else:
            width = max(v.size(1) for v in values)
            value = _pad_value(key, pad_token_id)
            merged[key] = torch.cat([_pad_width(v, width, value, key in _LEFT_PADDED) for v in values])
    return merged


def select_rows(output: dict[str, Any], rows: torch.Tensor, num_rows: int) -> dict[str, Any]:
    """Index every per-row tensor (first dimension ``num_rows``) of a generation output with ``rows``."""
    return {
        key: value[rows.to(value.device)]
        if isinstance(value, torch.Tensor) and value.dim() > 0 and value.size(0) == num_rows
        else value
        for key, value in output.items()
    }


def _rank_major_positions(counts: list[int], call_rows: int) -> torch.Tensor:
    """Positions of each process's first ``counts[r]`` rows in a gathered tensor of ``call_rows`` rows per process."""
    return torch.cat([torch.arange(count) + rank * call_rows for rank, count in enumerate(counts)]).long()


class V05GRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` with V0.5's value-prior baseline and one-step look-ahead rollout allocation.

    Args:
        *args, **kwargs: exactly those of ``trl.GRPOTrainer``; ``args`` must be a :class:`V05GRPOConfig`.
        value_prior: a :class:`~v05_trl.priors.ValuePrior`, a spec string for :func:`~v05_trl.priors.load_prior`,
            or ``None`` to build ``args.value_prior``.

    Example:
        ```python
        from datasets import load_dataset
        from trl.rewards import accuracy_reward
        from v05_trl import V05GRPOConfig, V05GRPOTrainer

        trainer = V05GRPOTrainer(
            model="Qwen/Qwen3-0.6B",
            reward_funcs=accuracy_reward,
            args=V05GRPOConfig(output_dir="qwen3-v05", value_prior="history"),
            train_dataset=load_dataset("trl-lib/DeepMath-103K", split="train"),
        )
        trainer.train()
        ```
    """

    _tag_names = ["trl", "grpo", "v0.5"]
    _name = "V0.5 GRPO"
    _paper = {
        "title": "V0.5: Generalist Value Model as a Prior for Sparse RL Rollouts",
        "id": "2603.10848",
        # docstyle-ignore
        "citation": textwrap.dedent("""\
            @article{generalist_value_model_v05,
                title        = {{V0.5: Generalist Value Model as a Prior for Sparse RL Rollouts}},
                author       = {Yi-Kai Zhang and Yueqing Sun and Hongyan Hao and Qi Gu and Xunliang Cai and De-Chuan Zhan and Han-Jia Ye},
                year         = 2026,
                eprint       = {arXiv:2603.10848},
            }"""),
    }

    def __init__(self, *args, value_prior: ValuePrior | str | None = None, **kwargs):
        names = ("model", "reward_funcs", "args")
        params = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
        config = params.get("args")
        if config is None:
            model = params["model"]
            model_id = model if isinstance(model, str) else model.config._name_or_path
            config = V05GRPOConfig(f"{str(model_id).rstrip('/').split('/')[-1]}-V05GRPO")
            if len(args) >= 3:
                args = (*args[:2], config, *args[3:])
            else:
                kwargs["args"] = config
        elif not isinstance(config, V05GRPOConfig):
            raise TypeError(
                f"V05GRPOTrainer needs args=V05GRPOConfig(...), got {type(config).__name__}. V05GRPOConfig takes every "
                f"{GRPOConfig.__name__} field plus the V0.5 ones."
            )
        super().__init__(*args, **kwargs)
        if self._is_vlm:
            raise NotImplementedError(
                "V05GRPOTrainer does not support vision-language models yet: their pixel inputs cannot be merged "
                "across rollout stages. Use trl.GRPOTrainer."
            )

        if value_prior is None:
            value_prior = config.value_prior
        if isinstance(value_prior, str):
            value_prior = load_prior(
                value_prior,
                context_size=config.prior_context_size,
                min_context=config.prior_min_context,
                device=str(self.accelerator.device),
            )
        elif not isinstance(value_prior, ValuePrior):
            raise TypeError(f"value_prior must be a ValuePrior, a spec string or None, got {type(value_prior)}")
        self.value_prior = value_prior

        # A step now produces up to k_max / k_init times the generation batch; keep the completions table whole.
        # Round calls of processes that draw fewer rows are padded, so up to num_processes times that many rows.
        rows_per_step = config.generation_batch_size // config.num_generations * config.max_num_generations
        rows_per_step *= self.accelerator.num_processes
        self._logs = {
            key: (
                deque(value, maxlen=rows_per_step)
                if isinstance(value, deque)
                else type(value)(lambda: deque(maxlen=rows_per_step))
            )
            for key, value in self._logs.items()
        }
        self._stage_rewards_per_func: torch.Tensor | None = None
        self._stage_generation: dict[str, list] | None = None

    # ------------------------------------------------------------------------------------------------------------
    # Hooks on the parent's generation path: keep what each stage computed
    # ------------------------------------------------------------------------------------------------------------

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._stage_rewards_per_func = rewards_per_func
        return rewards_per_func

    def _generate(self, prompts: list):
        result = super()._generate(prompts)
        prompt_ids, completion_ids, tool_mask = result[0], result[1], result[2]
        eos_and_pad = {*self.eos_token_ids, self._tokenizer.pad_token_id}
        self._stage_generation = {
            "prompt_lengths": [len(ids) for ids in prompt_ids],
            "completion_lengths": [sum(m) for m in tool_mask] if tool_mask else [len(ids) for ids in completion_ids],
            "truncated": [len(ids) == 0 or ids[-1] not in eos_and_pad for ids in completion_ids],
        }
        return result

    # ------------------------------------------------------------------------------------------------------------
    # Staged generation
    # ------------------------------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:
            return super()._generate_and_score_completions(inputs)

        args: V05GRPOConfig = self.args
        num_processes, rank = self.accelerator.num_processes, self.accelerator.process_index
        k_init = self.num_generations
        groups_per_process = len(inputs) // k_init
        first_rows = [inputs[g * k_init] for g in range(groups_per_process)]
        for g, row in enumerate(first_rows):
            if any(inputs[g * k_init + j]["prompt"] != row["prompt"] for j in range(k_init)):
                raise RuntimeError(
                    "V05GRPOTrainer expects each prompt's num_generations rows to be consecutive in the generation "
                    "batch, as TRL's RepeatSampler yields them; a custom sampler broke that order."
                )
        num_groups = groups_per_process * num_processes
        logging_state = self._snapshot_logging()

        # 1. The prior, before any rollout. Every process predicts its own prompts; all of them see all.
        start = time.perf_counter()
        prior_prob = torch.full((groups_per_process,), math.nan, dtype=torch.float64)
        if self.value_prior is not None:
            columns = {key: [row[key] for row in first_rows] for key in first_rows[0] if key != "prompt"}
            prior_prob = self.value_prior.predict([row["prompt"] for row in first_rows], **columns).double()
        prior_prob = gather(prior_prob.to(self.accelerator.device)).cpu()
        prior_seconds = time.perf_counter() - start
        prior_value = prior_to_reward_scale(prior_prob, args.reward_range)
        noise_variance = reward_noise_variance(prior_prob, args.reward_range, args.noise_model)

        # 2-3. Stage 1: k_init rollouts per prompt, generated and scored by the parent.
        stage_groups = [
            torch.arange(groups_per_process).repeat_interleave(k_init) + r * groups_per_process
            for r in range(num_processes)
        ]
        stages = [self._run_stage(inputs, stage_groups, [len(inputs)] * num_processes, whole_groups=True)]
        drawn = torch.full((num_groups,), k_init, dtype=torch.long)

        # 4. OSLA rounds: every process plans for all prompts from the same gathered rewards.
        budget_left = args.rollout_budget
        for _ in range(args.max_rollout_rounds):
            count, mean = self._group_counts_and_means(stages, num_groups, prior_value)
            extra = self._plan_extra_rollouts(count, mean, drawn, prior_value, noise_variance, budget_left)
            if int(extra.sum()) == 0:
                break
            per_process = extra.view(num_processes, groups_per_process)
            stage_groups = [
                torch.arange(groups_per_process).repeat_interleave(per_process[r]) + r * groups_per_process
                for r in range(num_processes)
            ]
            local_groups = stage_groups[rank] - rank * groups_per_process
            rows = [dict(first_rows[g]) for g in local_groups.tolist()]
            call_rows = int(per_process.sum(dim=1).max())
            rows += [dict(first_rows[0]) for _ in range(call_rows - len(rows))]  # dropped after the call
            stages.append(self._run_stage(rows, stage_groups, per_process.sum(dim=1).tolist()))
            drawn += extra
            if budget_left is not None:
                budget_left -= int(extra.sum())

        # 5. The shrinkage baseline over all of each prompt's rollouts, and the advantages.
        count, mean = self._group_counts_and_means(stages, num_groups, prior_value)
        scorable = count > 0
        estimate = shrinkage_baseline(mean, prior_value, count.clamp(min=1), noise_variance)
        rewards = torch.cat([s.rewards for s in stages])
        row_groups = torch.cat([s.groups for s in stages])
        advantages = self._advantages(rewards, row_groups, estimate.baseline, num_groups)

        output = self._merge_stages(stages, advantages)
        self._log_step(
            stages, logging_state, rewards, row_groups, advantages, estimate, prior_prob, drawn, count, mean
        )

        # 6. The prior learns from the fresh pass rates (all processes alike, so their states agree).
        start = time.perf_counter()
        if self.value_prior is not None and bool(scorable.any()):
            prompts = gather_object([row["prompt"] for row in first_rows])
            successes = torch.zeros(num_groups, dtype=torch.float64).index_add_(
                0, row_groups[~rewards.isnan()], (rewards[~rewards.isnan()] >= args.success_threshold).double()
            )
            keep = scorable.nonzero().flatten().tolist()
            self.value_prior.update(
                [prompts[g] for g in keep], (successes / count.clamp(min=1))[keep].tolist(), count[keep].tolist()
            )
        prior_seconds += time.perf_counter() - start
        self._metrics["train"]["v05/prior_seconds"].append(prior_seconds)
        return output

    def _run_stage(
        self, rows: list[dict], stage_groups: list[torch.Tensor], real_counts: list[int], whole_groups: bool = False
    ) -> _Stage:
        """Generate and score ``rows`` through the parent; keep this process's first ``real_counts[rank]`` rows.

        ``whole_groups``: the rows are ``num_generations`` consecutive rows per prompt (stage 1). A round's rows are
        not, so the parent runs with ``num_generations = 1`` there, which keeps its reshapes valid; the advantages it
        computes are discarded either way.
        """
        rank = self.accelerator.process_index
        saved = self.num_generations
        self.num_generations = saved if whole_groups else 1
        try:
            output = super()._generate_and_score_completions(rows)
        finally:
            self.num_generations = saved
        for key in _UNMERGEABLE:
            if output.get(key) is not None:
                raise NotImplementedError(f"V05GRPOTrainer cannot merge {key!r} across rollout stages")

        positions = _rank_major_positions(real_counts, len(rows))
        rewards_per_func = self._stage_rewards_per_func[positions.to(self._stage_rewards_per_func.device)].cpu()
        weights = self.reward_weights.to(rewards_per_func.device)
        rewards = (rewards_per_func * weights).nansum(dim=1).double()
        rewards[rewards_per_func.isnan().all(dim=1)] = math.nan
        start = sum(real_counts[:rank])
        num_real = real_counts[rank]
        generation = self._stage_generation
        return _Stage(
            output=select_rows(output, torch.arange(num_real), len(rows)),
            rewards=rewards,
            rewards_per_func=rewards_per_func,
            groups=torch.cat(stage_groups),
            local=slice(start, start + num_real),
            call_rows=len(rows),
            real_counts=list(real_counts),
            prompt_lengths=generation["prompt_lengths"][:num_real],
            completion_lengths=generation["completion_lengths"][:num_real],
            truncated=generation["truncated"][:num_real],
        )

    # ------------------------------------------------------------------------------------------------------------
    # The estimator on the gathered rewards (identical on every process)
    # ------------------------------------------------------------------------------------------------------------

    def _group_counts_and_means(
        self, stages: list[_Stage], num_groups: int, prior_value: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Scorable rollouts and mean reward of every prompt so far.

        A prompt with no scorable rollout yet gets its prior (or the middle of the reward range) as mean: it draws
        nothing more and its rows have zero advantage, but the estimator needs a number there.
        """
        rewards = torch.cat([s.rewards for s in stages])
        groups = torch.cat([s.groups for s in stages])
        scored = ~rewards.isnan()
        stats = group_statistics(rewards[scored], groups[scored], num_groups, reward_range=self.args.reward_range)
        fallback = prior_value.nan_to_num(sum(self.args.reward_range) / 2)
        return stats.count, torch.where(stats.count > 0, stats.mean, fallback)

    def _plan_extra_rollouts(self, count, mean, drawn, prior_value, noise_variance, budget_left) -> torch.Tensor:
        """OSLA's extra rollouts per prompt, capped so that no prompt draws more than ``max_num_generations``."""
        args: V05GRPOConfig = self.args
        scorable = count > 0
        extra = osla_extra_rollouts(
            mean,
            prior_value,
            count.clamp(min=1),
            noise_variance,
            max_rollouts=args.max_num_generations,
            rollout_cost=args.rollout_cost,
            reward_range=args.reward_range,
            mode=args.osla_mode,
            budget=budget_left,
        )
        # Unscorable rollouts (every reward function returned None) still count against k_max.
        extra = torch.minimum(extra, args.max_num_generations - drawn).clamp(min=0)
        return torch.where(scorable, extra, torch.zeros_like(extra))

    def _advantages(self, rewards, row_groups, baseline, num_groups) -> torch.Tensor:
        """``reward - baseline``, scaled as ``advantage_scale`` says (TRL's ``scale_rewards``); 0 if unscorable.

        TRL divides by ``std + 1e-4``; where the spread is zero the V0.5 advantage (unlike GRPO's) need not be, so
        it is kept unscaled rather than multiplied by 1e4.
        """
        advantages = rewards - baseline[row_groups]
        scored = ~rewards.isnan()
        if self.args.advantage_scale == "group":
            std = group_statistics(rewards[scored], row_groups[scored], num_groups).std[row_groups]
        elif self.args.advantage_scale == "batch":
            batch_std = rewards[scored].std() if int(scored.sum()) > 1 else torch.tensor(0.0, dtype=rewards.dtype)
            std = batch_std.expand_as(rewards)
        else:
            std = torch.zeros_like(rewards)
        spread = ~torch.isclose(std, torch.zeros_like(std))
        advantages = torch.where(spread, advantages / (std + 1e-4), advantages)
        return advantages.nan_to_num(0.0).float()

    # ------------------------------------------------------------------------------------------------------------
    # Merging the stages into one generation batch
    # ------------------------------------------------------------------------------------------------------------

    def _merge_stages(self, stages: list[_Stage], advantages: torch.Tensor) -> dict[str, Any]:
        device = self.accelerator.device
        num_processes, rank = self.accelerator.num_processes, self.accelerator.process_index
        outputs, offset = [], 0
        for stage in stages:
            local = slice(offset + stage.local.start, offset + stage.local.stop)
            outputs.append({**stage.output, "advantages": advantages[local].to(device)})
            offset += len(stage.rewards)
        merged = merge_outputs(outputs, self._tokenizer.pad_token_id)

        # Every process needs the same row count, a multiple of steps_per_generation (split_tensor_dict drops the
        # rest). Padding rows copy a real row with a zero loss mask and a zero advantage.
        steps = self.args.steps_per_generation
        real_rows = [sum(stage.real_counts[r] for stage in stages) for r in range(num_processes)]
        target = math.ceil(max(real_rows) / steps) * steps
        num_padding = target - real_rows[rank]
        if num_padding:
            padding = select_rows(merged, torch.zeros(num_padding, dtype=torch.long), real_rows[rank])
            for key in ("completion_mask", "tool_mask", "advantages"):
                if padding.get(key) is not None:
                    padding[key] = torch.zeros_like(padding[key])
            merged = merge_outputs([merged, padding], self._tokenizer.pad_token_id)
        loss_mask = merged["completion_mask"]
        if merged.get("tool_mask") is not None:
            loss_mask = loss_mask * merged["tool_mask"]
        merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        merged[_MEAN_REAL_ROWS] = torch.tensor(sum(real_rows) / (num_processes * steps), device=device)
        return merged

    def _compute_loss(self, model, inputs):
        loss = super()._compute_loss(model, inputs)
        mean_real_rows = inputs.get(_MEAN_REAL_ROWS)
        if mean_real_rows is not None and self.loss_type in ROW_NORMALISED_LOSSES:
            # These losses divide by the micro-batch's row count, padding rows included; divide by the mean count
            # of real rows instead. Without padding the two are equal and the factor is exactly 1.
            loss = loss * (inputs["completion_ids"].size(0) / mean_real_rows)
        return loss

    # ------------------------------------------------------------------------------------------------------------
    # Metrics: replace what the parent logged per stage with figures for the merged batch
    # ------------------------------------------------------------------------------------------------------------

    def _snapshot_logging(self) -> dict[str, Any]:
        return {
            "metric_lengths": {key: len(values) for key, values in self._metrics["train"].items()},
            "tokens_seen": self.state.num_input_tokens_seen,
        }

    def _log_step(self, stages, snapshot, rewards, row_groups, advantages, estimate, prior_prob, drawn, count, mean):
        metrics = self._metrics["train"]
        added = {}
        for key, values in metrics.items():
            start = snapshot["metric_lengths"].get(key, 0) if key != "num_tokens" else 0
            added[key] = values[start:]
            del values[start:]
        call_rows = [stage.call_rows for stage in stages]

        # Generation figures of the real rows of every process, in the rank-major order of `rewards`.
        per_process = gather_object([[(s.prompt_lengths, s.completion_lengths, s.truncated) for s in stages]])
        prompt_lengths, completion_lengths, truncated = [], [], []
        for index in range(len(stages)):
            for process in per_process:
                prompt_lengths += process[index][0]
                completion_lengths += process[index][1]
                truncated += process[index][2]
        lengths = torch.tensor(completion_lengths, dtype=torch.float)
        is_truncated = torch.tensor(truncated, dtype=torch.bool)
        terminated = lengths[~is_truncated] if bool((~is_truncated).any()) else torch.zeros(1)
        self.state.num_input_tokens_seen = snapshot["tokens_seen"] + sum(prompt_lengths) + sum(completion_lengths)
        figures = {
            "num_tokens": self.state.num_input_tokens_seen,
            "completions/mean_length": lengths.mean(),
            "completions/min_length": lengths.min(),
            "completions/max_length": lengths.max(),
            "completions/clipped_ratio": is_truncated.float().mean(),
            "completions/mean_terminated_length": terminated.mean(),
            "completions/min_terminated_length": terminated.min(),
            "completions/max_terminated_length": terminated.max(),
        }

        rewards_per_func = torch.cat([s.rewards_per_func for s in stages])
        for i, name in enumerate(self.reward_func_names):
            figures[f"rewards/{name}/mean"] = torch.nanmean(rewards_per_func[:, i])
            figures[f"rewards/{name}/std"] = _nanstd(rewards_per_func[:, i])
        scored = ~rewards.isnan()
        num_groups = len(drawn)
        group_std = group_statistics(rewards[scored], row_groups[scored], num_groups).std
        lo, hi = self.args.reward_range
        opinion = ~prior_prob.isnan() & (count > 0)
        empirical_prob = (mean - lo) / (hi - lo)
        figures |= {
            "reward": torch.nanmean(rewards),
            "reward_std": _nanstd(rewards),
            "frac_reward_zero_std": torch.isclose(group_std, torch.zeros_like(group_std))[row_groups].float().mean(),
            "v05/rollouts_per_prompt/mean": drawn.float().mean(),
            "v05/rollouts_per_prompt/max": drawn.max(),
            "v05/completions": len(rewards),
            "v05/completion_tokens": sum(completion_lengths),
            "v05/padding_completions": sum(
                rows * len(s.real_counts) - sum(s.real_counts) for rows, s in zip(call_rows, stages, strict=True)
            ),
            "v05/rounds": len(stages) - 1,
            "v05/prior_coverage": opinion.float().mean(),
            "v05/prior_rejected_frac": (estimate.weight[opinion] > 0).float().mean(),
            "v05/shrinkage_weight/mean": estimate.weight[count > 0].mean(),
            "v05/prior_gap/mean": (prior_prob - empirical_prob).abs()[opinion].mean(),
            "v05/baseline_mse": estimate.mse[count > 0].mean(),
            "v05/frac_nonzero_advantage": (advantages != 0).float().mean(),
        }
        for key, value in figures.items():
            metrics[key].append(float(value))

        # Whatever else the parent logged per stage (vLLM sampling figures, reward functions' own metrics):
        # combine the stages, weighted by their rows.
        for key, values in added.items():
            if key in figures or not values:
                continue
            if key.endswith("min"):
                metrics[key].append(min(values))
            elif key.endswith("max"):
                metrics[key].append(max(values))
            elif len(values) == len(stages):
                metrics[key].append(sum(v * n for v, n in zip(values, call_rows, strict=True)) / sum(call_rows))
            else:
                metrics[key].append(sum(values) / len(values))
        self._rebuild_completion_logs(stages, rewards_per_func, advantages)

    def _rebuild_completion_logs(self, stages, rewards_per_func, advantages) -> None:
        """Make the completions table hold this generation batch's real rows, as TRL's holds its latest batch.

        The parent appended every row of every stage call (padding rows of a round included), rank-major per call.
        """
        num_processes = self.accelerator.num_processes
        positions, appended_rows = [], 0
        for stage in stages:
            positions.append(_rank_major_positions(stage.real_counts, stage.call_rows) + appended_rows)
            appended_rows += stage.call_rows * num_processes
        positions = torch.cat(positions).tolist()

        def keep_real_rows(column: deque) -> None:
            appended = list(column)[-appended_rows:]
            column.clear()
            if len(appended) == appended_rows:
                column.extend(appended[i] for i in positions)
            else:  # a column a reward function logged in only some of the stage calls cannot be aligned
                column.extend([None] * len(positions))

        for column in [self._logs["prompt"], self._logs["completion"], *self._logs["extra"].values()]:
            keep_real_rows(column)
        self._logs["advantages"].clear()
        self._logs["advantages"].extend(advantages.tolist())
        for i, name in enumerate(self.reward_func_names):
            self._logs["rewards"][name].clear()
            self._logs["rewards"][name].extend(rewards_per_func[:, i].tolist())

    # ------------------------------------------------------------------------------------------------------------
    # Model card and checkpoints
    # ------------------------------------------------------------------------------------------------------------

    def create_model_card(
        self, model_name: str | None = None, dataset_name: str | None = None, tags: str | list[str] | None = None
    ):
        """Write ``README.md`` in ``output_dir`` from V0.5's card template (settings, rollouts used, evaluation)."""
        if not self.is_world_process_zero():
            return
        model_id = get_config_model_id(self.model.config)
        tags = {tags} if isinstance(tags, str) else set(tags or ())
        card = render_model_card(
            model_name=model_name or Path(self.args.output_dir).name,
            args=self.args,
            log_history=self.state.log_history,
            base_model=model_id if model_id and not os.path.isdir(model_id) else None,
            dataset_name=dataset_name,
            hub_model_id=self.args.hub_model_id,
            tags=tags | set(self._tag_names),
            output_dir=self.args.output_dir,
        )
        card.save(os.path.join(self.args.output_dir, "README.md"))

    # ------------------------------------------------------------------------------------------------------------
    # Checkpoints carry the prior's state
    # ------------------------------------------------------------------------------------------------------------

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.value_prior is not None and self.args.should_save:
            folder = os.path.join(
                self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            )
            with open(os.path.join(folder, PRIOR_STATE_FILE), "w") as f:
                json.dump(self.value_prior.state_dict(), f)

    def _load_optimizer_and_scheduler(self, checkpoint):
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None or self.value_prior is None:
            return
        path = os.path.join(checkpoint, PRIOR_STATE_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(
                f"{path} is missing: the checkpoint was not written by V05GRPOTrainer with a value prior, so the "
                "prior's state cannot be restored. Resume with value_prior='none' or from a V0.5 checkpoint."
            )
        with open(path) as f:
            self.value_prior.load_state_dict(json.load(f))


def _nanstd(values: torch.Tensor) -> torch.Tensor:
    """Unbiased standard deviation ignoring NaNs, as TRL's ``nanstd``; NaN for fewer than two values."""
    values = values[~values.isnan()]
    return values.std() if values.numel() > 1 else torch.tensor(math.nan)
