"""Trainer speed on CPU: TRL's GRPOTrainer (G = 4 and 16) against V05GRPOTrainer (4 -> 16) on the same prompts.

Each method trains the warm-started tiny model of ``make demo`` on the same one-digit additions for
``--warmup-steps`` (not measured: the history prior needs one pass over the prompts to have opinions) and then
``--steps`` measured optimizer steps. Per step it records the wall time, the time inside generation (the parent's
``_generate_single_turn``: transformers' ``generate``), and the completions generated.

Targets (issue #4):
1. V0.5's time outside generation is at most 10% above GRPOTrainer's for the same number of completions: per
   completion, against GRPO-4 run on as many prompts per step as make V0.5's completions (``grpo_matched``);
2. V0.5's step time is at most half of GRPO-16's.

Prints a table, writes ``--out`` (JSON) and a PNG beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm  # noqa: E402
from transformers import TrainerCallback  # noqa: E402

from v05_trl import demo  # noqa: E402


class StepTimer(TrainerCallback):
    """Wall time and generation time of every optimizer step after the warm-up."""

    def __init__(self, trainer, warmup_steps: int):
        self.warmup_steps = warmup_steps
        self.generation_seconds = 0.0
        self.steps: list[dict] = []
        generate = trainer._generate_single_turn

        def timed_generate(*args, **kwargs):
            start = time.perf_counter()
            try:
                return generate(*args, **kwargs)
            finally:
                self.generation_seconds += time.perf_counter() - start

        trainer._generate_single_turn = timed_generate

    def on_step_begin(self, args, state, control, **kwargs):
        self.generation_seconds = 0.0
        self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step > self.warmup_steps:
            seconds = time.perf_counter() - self.start
            self.steps.append({"step_seconds": seconds, "generation_seconds": self.generation_seconds})


def run_method(name: str, model_path: Path, output_dir: Path, options, prompts_per_step: int | None = None) -> dict:
    from trl import GRPOConfig, GRPOTrainer

    from v05_trl import V05GRPOConfig, V05GRPOTrainer

    k = 4 if name != "grpo_g16" else 16
    prompts_per_step = prompts_per_step or options.prompts_per_step
    common = dict(
        output_dir=str(output_dir / name),
        max_steps=options.warmup_steps + options.steps,
        per_device_train_batch_size=prompts_per_step * k,
        num_generations=k,
        max_completion_length=options.max_completion_length,
        # A fixed policy: every method then samples from the same distribution, so the completions (and their lengths)
        # are comparable and the timings measure the trainers, not how far each run has moved the policy.
        learning_rate=0.0,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=options.seed,
        disable_tqdm=True,
        log_level="warning",
        loss_type="dapo",
    )
    rl_dataset, _ = demo.arithmetic_dataset(options.num_prompts, seed=options.seed)
    dataset = rl_dataset.remove_columns("completion")
    if name == "v05":
        args = V05GRPOConfig(max_num_generations=16, value_prior="history", **common)
        trainer_class = V05GRPOTrainer
    else:
        args = GRPOConfig(scale_rewards="none", **common)
        trainer_class = GRPOTrainer
    trainer = trainer_class(
        model=str(model_path), reward_funcs=demo.first_number_reward, args=args, train_dataset=dataset
    )
    timer = StepTimer(trainer, options.warmup_steps)
    trainer.add_callback(timer)
    trainer.train()

    logged = [entry for entry in trainer.state.log_history if "reward" in entry][options.warmup_steps :]
    if name == "v05":
        completions = [entry["v05/completions"] for entry in logged]
    else:
        completions = [prompts_per_step * k] * len(logged)
    step = [s["step_seconds"] for s in timer.steps]
    generation = [s["generation_seconds"] for s in timer.steps]
    outside = [s - g for s, g in zip(step, generation, strict=True)]
    return {
        "method": name,
        "steps": len(step),
        "completions_per_step": statistics.mean(completions),
        "step_seconds": statistics.mean(step),
        "generation_seconds": statistics.mean(generation),
        "outside_generation_seconds": statistics.mean(outside),
        "reward": statistics.mean(entry["reward"] for entry in logged),
        "mean_completion_length": statistics.mean(entry["completions/mean_length"] for entry in logged),
    }


def check_targets(rows: dict[str, dict]) -> dict:
    v05, matched, g16 = rows["v05"], rows["grpo_matched"], rows["grpo_g16"]
    # Time outside generation per completion, V0.5 against GRPO-4 run on as many completions per step.
    per_completion = {
        name: row["outside_generation_seconds"] / row["completions_per_step"] for name, row in rows.items()
    }
    overhead = per_completion["v05"] / per_completion["grpo_matched"] - 1
    ratio = v05["step_seconds"] / g16["step_seconds"]
    return {
        "matched_completions": matched["completions_per_step"],
        "outside_generation_overhead": overhead,
        "outside_generation_target_met": overhead <= 0.10,
        "step_time_vs_grpo16": ratio,
        "step_time_target_met": ratio <= 0.5,
    }


def plot(rows: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    generation = [rows[n]["generation_seconds"] for n in names]
    outside = [rows[n]["outside_generation_seconds"] for n in names]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(names, generation, label="generation")
    ax.bar(names, outside, bottom=generation, label="outside generation")
    for i, n in enumerate(names):
        ax.text(
            i, generation[i] + outside[i], f"{rows[n]['completions_per_step']:.0f} compl.", ha="center", va="bottom"
        )
    ax.set_ylabel("seconds per optimizer step")
    ax.set_title("Tiny model on CPU: step time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench_trainer.json")
    parser.add_argument("--steps", type=int, default=16, help="measured optimizer steps per method")
    parser.add_argument("--warmup-steps", type=int, default=4)
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--num-prompts", type=int, default=16)
    parser.add_argument("--max-completion-length", type=int, default=32)
    parser.add_argument("--warm-start-steps", type=int, default=200)
    # Wider and deeper than the demo's 64 x 2, so that compute, not per-call overhead, dominates the step as it does
    # at real scale; still built offline in seconds.
    parser.add_argument("--hidden-size", type=int, default=512, help="of the tiny Qwen3 (the demo's is 64)")
    parser.add_argument("--num-layers", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)

    from v05_trl.tiny_model import build_tiny_model

    out = Path(options.out)
    work = out.parent / "bench_trainer_runs"
    _, warm_start_dataset = demo.arithmetic_dataset(options.num_prompts, seed=options.seed)
    model_path = build_tiny_model(
        work / "base-model", hidden_size=options.hidden_size, num_layers=options.num_layers, seed=options.seed
    )
    if options.warm_start_steps:
        model_path = demo.warm_start(
            model_path, warm_start_dataset, work / "warm-start", options.warm_start_steps, options.seed
        )

    rows = {}
    for name in tqdm(["grpo_g4", "grpo_g16", "v05", "grpo_matched"], desc="methods"):
        # grpo_matched: GRPO-4 on as many prompts per step as V0.5 generated completions / 4.
        prompts = round(rows["v05"]["completions_per_step"] / 4) if name == "grpo_matched" else None
        rows[name] = run_method(name, model_path, work, options, prompts_per_step=prompts)
    targets = check_targets(rows)

    header = f"{'method':<10} {'compl./step':>11} {'mean len':>8} {'step s':>8} {'gen s':>8} {'outside s':>10} {'reward':>7}"
    print(header)
    print("-" * len(header))
    for row in rows.values():
        print(
            f"{row['method']:<10} {row['completions_per_step']:>11.1f} {row['mean_completion_length']:>8.2f} "
            f"{row['step_seconds']:>8.3f} "
            f"{row['generation_seconds']:>8.3f} {row['outside_generation_seconds']:>10.3f} {row['reward']:>7.3f}"
        )
    print(
        "\n1. V0.5 time outside generation per completion vs GRPO-4 on "
        f"{targets['matched_completions']:.0f} completions: {100 * targets['outside_generation_overhead']:+.1f}%"
        f" (target <= +10%: {'met' if targets['outside_generation_target_met'] else 'MISSED'})"
    )
    print(
        f"2. V0.5 step time / GRPO-16 step time: {targets['step_time_vs_grpo16']:.2f}"
        f" (target <= 0.50: {'met' if targets['step_time_target_met'] else 'MISSED'})"
    )

    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"settings": vars(options), "methods": rows, "targets": targets}
    out.write_text(json.dumps(result, indent=2))
    plot(rows, out.with_suffix(".png"))
    print(f"\nWrote {out} and {out.with_suffix('.png')}")
    return result


if __name__ == "__main__":
    main()
