"""``make demo``: a short V0.5 training run on CPU, offline, in about a minute.

The tiny 2-layer Qwen3 model is built on the spot (no download); the task is a small built-in set of one-digit
additions with a verifiable reward (the first number of the completion must be the sum); the prior is the
checkpoint-free history prior, which learns each prompt's pass rate from its own earlier rollouts. The run shows
TRL's progress bar, ends with a summary table (rollouts used against GRPO with G = 16, reward, prior acceptance),
and saves the model with its model card.

Run ``python -m v05_trl.demo --help`` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path

from .rewards import completion_text

__all__ = ["arithmetic_dataset", "first_number_reward", "main", "summarize"]

_NUMBER = re.compile(r"-?\d+")


def arithmetic_dataset(num_prompts: int = 16, seed: int = 0):
    """Two splits of the 100 one-digit additions "What is a + b?": ``num_prompts`` for RL and the rest for the warm
    start, each with the sum in an ``answer`` column and as a ``completion`` (" 7") for supervised fine-tuning."""
    import random

    from datasets import Dataset

    pairs = [(a, b) for a in range(10) for b in range(10)]
    random.Random(seed).shuffle(pairs)

    def split(chosen):
        return Dataset.from_dict(
            {
                "prompt": [f"What is {a} + {b}?" for a, b in chosen],
                "answer": [str(a + b) for a, b in chosen],
                "completion": [f" {a + b}" for a, b in chosen],
            }
        )

    return split(pairs[:num_prompts]), split(pairs[num_prompts:])


def warm_start(model_path: Path, dataset, output_dir: Path, steps: int, seed: int) -> Path:
    """A few supervised steps (TRL's SFTTrainer) on held-out additions, so the random tiny model starts with some
    correct answers and the rewards of RL carry signal. Returns the folder of the warmed-up model."""
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(
        output_dir=str(output_dir),
        max_steps=steps,
        per_device_train_batch_size=32,
        learning_rate=3e-3,
        report_to=[],
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        disable_tqdm=True,
        log_level="warning",
        seed=seed,
    )
    trainer = SFTTrainer(model=str(model_path), train_dataset=dataset.remove_columns("answer"), args=args)
    trainer.train()
    trainer.save_model(str(output_dir))
    return output_dir


def first_number_reward(completions, answer, **kwargs) -> list[float]:
    """1.0 when the completion's first integer equals ``answer`` (a dataset column TRL passes along), else 0.0."""
    rewards = []
    for completion, expected in zip(completions, answer, strict=True):
        found = _NUMBER.search(completion_text(completion))
        rewards.append(float(found is not None and found.group() == str(expected)))
    return rewards


def summarize(log_history: list[dict], max_num_generations: int) -> dict:
    """The run's rollout figures (see :func:`v05_trl.model_card.training_usage`) and its reward, first and last
    quarter of the steps."""
    from .model_card import training_usage

    usage = training_usage(log_history, max_num_generations)
    if not usage["steps"]:
        raise ValueError("no V0.5 metrics in the log history; was the run trained with logging_steps=1?")
    rewards = [entry["reward"] for entry in log_history if "v05/completions" in entry]
    quarter = max(1, len(rewards) // 4)
    rejected = usage["prior_rejected"]
    return {
        **usage,
        "prior_acceptance": None if rejected == "n/a" else 1 - rejected,
        "reward_first_quarter": sum(rewards[:quarter]) / quarter,
        "reward_last_quarter": sum(rewards[-quarter:]) / quarter,
    }


def _print_table(summary: dict) -> None:
    def share(x):
        return "n/a" if x is None else f"{100 * x:.0f}%"

    saved = 1 - summary["completions"] / summary["completions_at_k_max"]
    rows = [
        ("optimizer steps", f"{summary['steps']}"),
        ("completions generated (V0.5)", f"{summary['completions']}"),
        ("completions GRPO with G = 16 would use", f"{summary['completions_at_k_max']}  (V0.5 saved {share(saved)})"),
        ("rollouts per prompt", f"{summary['rollouts_per_prompt']:.2f}"),
        (
            "reward, first -> last quarter",
            f"{summary['reward_first_quarter']:.3f} -> {summary['reward_last_quarter']:.3f}",
        ),
        ("prompts with a prior opinion", share(summary["prior_coverage"])),
        ("priors accepted (of those)", share(summary["prior_acceptance"])),
    ]
    width = max(len(name) for name, _ in rows)
    print("\nV0.5 demo summary")
    print("-" * (width + 40))
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    print("-" * (width + 40))


def _progress_bar_only():
    from transformers.trainer_callback import ProgressCallback

    class ProgressBarOnly(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            pass

    return ProgressCallback, ProgressBarOnly


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", default="outputs/demo", help="where the model, its card and summary go")
    parser.add_argument("--max-steps", type=int, default=100)
    parser.add_argument("--num-prompts", type=int, default=16, help="distinct prompts (they recur across steps)")
    parser.add_argument("--value-prior", default="history", help="any spec load_prior accepts")
    parser.add_argument("--warm-start-steps", type=int, default=100, help="supervised steps before RL (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from . import V05GRPOConfig, V05GRPOTrainer
    from .tiny_model import build_tiny_model

    ProgressCallback, _ProgressBarOnly = _progress_bar_only()

    output_dir = Path(options.output_dir)
    rl_dataset, warm_start_dataset = arithmetic_dataset(options.num_prompts, seed=options.seed)
    model_path = build_tiny_model(output_dir / "base-model", seed=options.seed)
    if options.warm_start_steps:
        print(
            f"Warm start: {options.warm_start_steps} supervised steps on {len(warm_start_dataset)} held-out additions"
        )
        model_path = warm_start(
            model_path, warm_start_dataset, output_dir / "warm-start", options.warm_start_steps, options.seed
        )
    args = V05GRPOConfig(
        output_dir=str(output_dir),
        max_steps=options.max_steps,
        per_device_train_batch_size=32,  # 8 prompts x k_init = 4 per step
        num_generations=4,
        max_num_generations=16,
        max_completion_length=8,
        learning_rate=3e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=options.seed,
        value_prior=options.value_prior,
        disable_tqdm=False,
        log_level="warning",
    )
    trainer = V05GRPOTrainer(
        model=str(model_path),
        reward_funcs=first_number_reward,
        args=args,
        train_dataset=rl_dataset.remove_columns("completion"),
    )
    # Keep TRL's progress bar but not its per-step dictionaries: the summary table below is the readout.
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(_ProgressBarOnly)
    trainer.train()
    summary = summarize(trainer.state.log_history, args.max_num_generations)
    _print_table(summary)

    trainer.save_model(str(output_dir))
    trainer.create_model_card(model_name=output_dir.name)  # README.md, with the V0.5 citation and tags
    (output_dir / "v05_summary.json").write_text(json.dumps(summary, indent=2))
    print(f"\nSaved the model, its card (README.md) and v05_summary.json to {output_dir}")
    return summary


if __name__ == "__main__":
    main()
