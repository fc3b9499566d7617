"""Does V0.5 learn faster per rollout than GRPO? A miniature of the paper's claim, end to end on CPU.

Task: sums of 2 to 4 one-digit numbers ("What is 3 + 8 + 5?"), a verifiable 0/1 reward (the completion's first
number must be the sum), disjoint splits for a supervised warm-up, RL training and a held-out test. The starting
policy is the tiny offline Qwen3 after a short warm-up (TRL's SFTTrainer), so that its pass rates spread over (0, 1);
it is cached in ``--cache-dir`` with the "oracle" pass rates of the RL prompts (many rollouts of the starting
policy).

Every method trains through ``V05GRPOTrainer`` on the same prompts per step until it has consumed the same rollout
budget, and its held-out accuracy (avg@4 at temperature 1, a fixed sampling seed) is measured at fixed rollout
milestones:

- ``grpo_g4`` / ``grpo_g16``: no prior, G = 4 / 16 (the trainer is then plain GRPO);
- ``v05_history``: V0.5 (4 -> 16) with the history prior;
- ``v05_oracle``: V0.5 with the oracle pass rates perturbed on the logit scale (``--oracle-noise``), a column prior;
- ``v05_fixed_k4``: the history prior's shrinkage baseline without OSLA (k = 4 always).

Target: V0.5 reaches GRPO-16's final held-out accuracy with at most half of GRPO-16's rollouts. Prints a table,
writes ``--out`` (JSON) and a PNG of accuracy against rollouts (mean and min-max band over seeds).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from transformers.trainer_callback import PrinterCallback  # noqa: E402

from v05_trl import demo  # noqa: E402

METHODS = {
    "grpo_g4": {"num_generations": 4, "max_num_generations": 4, "value_prior": "none"},
    "grpo_g16": {"num_generations": 16, "max_num_generations": 16, "value_prior": "none"},
    "v05_history": {"num_generations": 4, "max_num_generations": 16, "value_prior": "history"},
    "v05_oracle": {"num_generations": 4, "max_num_generations": 16, "value_prior": "column:oracle_pass_rate"},
    "v05_fixed_k4": {"num_generations": 4, "max_num_generations": 4, "value_prior": "history"},
}


# --------------------------------------------------------------------------------------------------------------
# Task
# --------------------------------------------------------------------------------------------------------------


def make_problems(options) -> dict[str, list[tuple[int, ...]]]:
    """Disjoint splits of distinct problems (tuples of 2-4 digits), the same for every seed."""
    rng = random.Random(1234)
    sizes = {"warm_start": options.warm_start_problems, "train": options.train_problems, "test": options.test_problems}
    problems: set[tuple[int, ...]] = set()
    while len(problems) < sum(sizes.values()):
        problems.add(tuple(rng.randint(0, 9) for _ in range(rng.choice((2, 3, 4)))))
    ordered = sorted(problems)
    rng.shuffle(ordered)
    splits, start = {}, 0
    for name, size in sizes.items():
        splits[name] = ordered[start : start + size]
        start += size
    return splits


def question(terms: tuple[int, ...]) -> str:
    return "What is " + " + ".join(map(str, terms)) + "?"


def as_dataset(problems, oracle: list[float] | None = None, completions: bool = False):
    from datasets import Dataset

    columns = {"prompt": [question(t) for t in problems], "answer": [str(sum(t)) for t in problems]}
    if completions:
        columns["completion"] = [f" {sum(t)}" for t in problems]
    if oracle is not None:
        columns["oracle_pass_rate"] = oracle
    return Dataset.from_dict(columns)


# --------------------------------------------------------------------------------------------------------------
# Starting policy and its pass rates (cached)
# --------------------------------------------------------------------------------------------------------------


def graded_samples(model, tokenizer, problems, samples: int, batch_size: int, **sampling) -> list[float]:
    """Per problem, the share of ``samples`` sampled completions whose first number is the sum (``sampling``:
    extra ``generate`` settings; without them, the model's own generation config)."""
    import torch

    rates = []
    for start in range(0, len(problems), batch_size):
        batch = problems[start : start + batch_size]
        encoded = tokenizer([question(t) for t in batch], return_tensors="pt", padding=True, padding_side="left")
        with torch.no_grad():
            out = model.generate(**encoded.to(model.device), do_sample=True, max_new_tokens=4,
                                 num_return_sequences=samples, pad_token_id=tokenizer.pad_token_id,
                                 **sampling)  # fmt: skip
        texts = tokenizer.batch_decode(out[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
        for i, terms in enumerate(batch):
            rewards = demo.first_number_reward(texts[i * samples : (i + 1) * samples], [str(sum(terms))] * samples)
            rates.append(sum(rewards) / samples)
    return rates


def sample_pass_rates(model_path: Path, problems, samples: int, seed: int) -> list[float]:
    """Pass rates of the policy at ``model_path`` (its own sampling settings), ``samples`` completions each."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_path).eval()
    return graded_samples(model, tokenizer, problems, samples, batch_size=32)


def starting_policy(options, splits) -> tuple[Path, list[float]]:
    from v05_trl.tiny_model import build_tiny_model

    key = f"h{options.hidden_size}-l{options.num_layers}-w{options.warm_start_steps}-n{options.warm_start_problems}"
    cache = Path(options.cache_dir) / key
    model_path, oracle_path = cache / "warm-start", cache / "oracle_pass_rates.json"
    if not (model_path / "config.json").exists():
        base = build_tiny_model(cache / "base-model", hidden_size=options.hidden_size, num_layers=options.num_layers)
        demo.warm_start(base, as_dataset(splits["warm_start"], completions=True),
                        model_path, options.warm_start_steps, seed=0)  # fmt: skip
    if not oracle_path.exists():
        oracle_path.write_text(json.dumps(sample_pass_rates(model_path, splits["train"], options.oracle_samples, 0)))
    return model_path, json.loads(oracle_path.read_text())


def perturb(rates: list[float], noise: float, seed: int) -> list[float]:
    """Pass rates moved by N(0, noise^2) on the logit scale (rates clipped to [0.01, 0.99] first)."""
    rng = random.Random(seed)
    moved = []
    for r in rates:
        r = min(max(r, 0.01), 0.99)
        logit = math.log(r / (1 - r)) + rng.gauss(0.0, noise)
        moved.append(1 / (1 + math.exp(-logit)))
    return moved


# --------------------------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------------------------


def sampled_accuracy(model, tokenizer, problems, samples: int = 4) -> float:
    """avg@``samples`` on ``problems`` at temperature 1 (the policy RL trains), with a fixed sampling seed; the
    global RNG is restored afterwards, so evaluating does not change the training run."""
    import torch

    was_training, rng_state = model.training, torch.get_rng_state()
    model.eval()
    torch.manual_seed(1234)
    rates = graded_samples(model, tokenizer, problems, samples, batch_size=64, temperature=1.0, top_p=1.0, top_k=0)
    torch.set_rng_state(rng_state)
    model.train(was_training)
    return sum(rates) / len(rates)


class RolloutBudget(TrainerCallback):
    """Counts the completions each step generated, evaluates at rollout milestones, stops at the budget."""

    def __init__(self, tokenizer, test_problems, budget: int, evaluations: int):
        self.tokenizer, self.test_problems, self.budget = tokenizer, test_problems, budget
        self.milestones = [budget * (i + 1) // evaluations for i in range(evaluations)]
        self.consumed = 0
        self.curve: list[tuple[int, float]] = []
        self.steps: list[dict] = []

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.curve.append((0, sampled_accuracy(model, self.tokenizer, self.test_problems)))

    def on_log(self, args, state, control, logs=None, model=None, **kwargs):
        if not logs or "v05/completions" not in logs:
            return
        self.steps.append({k: v for k, v in logs.items() if k.startswith("v05/") or k == "reward"})
        self.consumed += int(logs["v05/completions"])
        if self.milestones and self.consumed >= self.milestones[0]:
            while self.milestones and self.consumed >= self.milestones[0]:
                self.milestones.pop(0)
            self.curve.append((self.consumed, sampled_accuracy(model, self.tokenizer, self.test_problems)))
        if self.consumed >= self.budget:
            control.should_training_stop = True


def run(method: str, seed: int, model_path: Path, splits, oracle: list[float], options) -> dict:
    from transformers import AutoTokenizer

    from v05_trl import V05GRPOConfig, V05GRPOTrainer

    settings = METHODS[method]
    rows_per_step = options.prompts_per_step * settings["num_generations"]
    args = V05GRPOConfig(
        output_dir=str(Path(options.cache_dir) / "runs" / f"{method}-{seed}"),
        per_device_train_batch_size=rows_per_step,
        max_steps=options.budget // (options.prompts_per_step * 4) + 1,  # the budget stops every method earlier
        max_completion_length=4,
        learning_rate=options.learning_rate,
        loss_type="dapo",
        advantage_scale="none",
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        log_level="error",
        seed=seed,
        **settings,
    )
    dataset = as_dataset(splits["train"], oracle=perturb(oracle, options.oracle_noise, seed))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    trainer = V05GRPOTrainer(
        model=str(model_path), reward_funcs=demo.first_number_reward, args=args, train_dataset=dataset
    )
    budget = RolloutBudget(tokenizer, splits["test"], options.budget, options.evaluations)
    trainer.add_callback(budget)
    trainer.remove_callback(PrinterCallback)  # the per-step dictionaries; the table below is the readout
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start

    def mean_of(key):
        values = [s[key] for s in budget.steps if s.get(key) is not None]
        return statistics.mean(values) if values else None

    return {
        "method": method,
        "seed": seed,
        "curve": budget.curve,
        "rollouts": budget.consumed,
        "steps": len(budget.steps),
        "wall_seconds": seconds,
        "rollouts_per_prompt": mean_of("v05/rollouts_per_prompt/mean"),
        "prior_rejected_frac": mean_of("v05/prior_rejected_frac"),
        "prior_coverage": mean_of("v05/prior_coverage"),
        "rounds_per_step": mean_of("v05/rounds"),
        "frac_nonzero_advantage": mean_of("v05/frac_nonzero_advantage"),
        "train_reward": mean_of("reward"),
    }


# --------------------------------------------------------------------------------------------------------------
# Analysis
# --------------------------------------------------------------------------------------------------------------


def rollouts_to_reach(curve: list[tuple[int, float]], target: float) -> float | None:
    """Rollouts at which the accuracy curve first reaches ``target``, linear between milestones; None if never."""
    for (r0, a0), (r1, a1) in zip(curve, curve[1:], strict=False):
        if a0 >= target:
            return float(r0)
        if a1 >= target:
            return r0 + (r1 - r0) * (target - a0) / (a1 - a0)
    return float(curve[-1][0]) if curve and curve[-1][1] >= target else None


def summarize(runs: list[dict]) -> dict:
    by_method: dict[str, list[dict]] = {}
    for r in runs:
        by_method.setdefault(r["method"], []).append(r)
    finals = {m: [r["curve"][-1][1] for r in rs] for m, rs in by_method.items()}
    target = statistics.mean(finals["grpo_g16"]) if "grpo_g16" in finals else None
    g16_budget = statistics.mean(r["rollouts"] for r in by_method["grpo_g16"]) if "grpo_g16" in by_method else None
    summary = {"target_accuracy": target, "methods": {}}
    for method, rs in by_method.items():
        reach = [rollouts_to_reach(r["curve"], target) if target is not None else None for r in rs]
        reached = [x for x in reach if x is not None]
        entry = {
            "seeds": len(rs),
            "final_accuracy_mean": statistics.mean(finals[method]),
            "final_accuracy_min": min(finals[method]),
            "final_accuracy_max": max(finals[method]),
            "rollouts_to_target": reach,
            "rollouts_to_target_mean": statistics.mean(reached) if len(reached) == len(rs) else None,
            "wall_seconds_mean": statistics.mean(r["wall_seconds"] for r in rs),
        }
        for key in ("rollouts_per_prompt", "prior_rejected_frac", "rounds_per_step", "frac_nonzero_advantage"):
            values = [r[key] for r in rs if r[key] is not None]
            entry[key] = statistics.mean(values) if values else None
        summary["methods"][method] = entry
    for method in ("v05_history", "v05_oracle"):
        entry = summary["methods"].get(method)
        if entry and g16_budget:
            needed = entry["rollouts_to_target_mean"]
            entry["share_of_grpo16_rollouts"] = needed / g16_budget if needed is not None else None
            entry["target_met"] = needed is not None and needed <= 0.5 * g16_budget
    return summary


def plot(runs: list[dict], summary: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method in METHODS:
        curves = [r["curve"] for r in runs if r["method"] == method]
        if not curves:
            continue
        length = min(len(c) for c in curves)
        xs = [statistics.mean(c[i][0] for c in curves) for i in range(length)]
        accs = [[c[i][1] for c in curves] for i in range(length)]
        ax.plot(xs, [statistics.mean(a) for a in accs], label=method, marker="o", markersize=3)
        ax.fill_between(xs, [min(a) for a in accs], [max(a) for a in accs], alpha=0.15)
    if summary["target_accuracy"] is not None:
        ax.axhline(summary["target_accuracy"], color="grey", linestyle="--", linewidth=1, label="GRPO-16 final")
    ax.set_xlabel("rollouts consumed")
    ax.set_ylabel("held-out accuracy (avg@4, temperature 1)")
    ax.set_title("Tiny model, sums of digits (lines: mean, bands: min-max over seeds)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/bench_learning.json")
    parser.add_argument("--cache-dir", default="results/bench_learning_cache", help="starting policy, oracle, runs")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=12288, help="rollouts per run")
    parser.add_argument("--evaluations", type=int, default=8, help="held-out evaluations per run (milestones)")
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=3e-4)
    parser.add_argument("--warm-start-problems", type=int, default=800)
    parser.add_argument("--train-problems", type=int, default=256)
    parser.add_argument("--test-problems", type=int, default=300)
    parser.add_argument("--warm-start-steps", type=int, default=200)
    parser.add_argument("--hidden-size", type=int, default=128)
    parser.add_argument("--num-layers", type=int, default=2)
    parser.add_argument("--oracle-samples", type=int, default=32)
    parser.add_argument("--oracle-noise", type=float, default=0.5, help="std of the logit-scale perturbation")
    options = parser.parse_args(argv)

    splits = make_problems(options)
    model_path, oracle = starting_policy(options, splits)
    runs = []
    jobs = [(method, seed) for seed in range(options.seeds) for method in options.methods]
    for method, seed in tqdm(jobs, desc="runs"):
        runs.append(run(method, seed, model_path, splits, oracle, options))
    summary = summarize(runs)

    header = (f"{'method':<14} {'final acc (min-max)':>22} {'rollouts to target':>19} {'roll/prompt':>11} "
              f"{'rejected':>9} {'rounds':>7} {'wall s':>7}")  # fmt: skip
    print(f"\nTarget: GRPO-16's final held-out accuracy = {summary['target_accuracy']}")
    print(header)
    print("-" * len(header))

    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    for method, e in summary["methods"].items():
        band = f"{e['final_accuracy_mean']:.3f} ({e['final_accuracy_min']:.3f}-{e['final_accuracy_max']:.3f})"
        print(f"{method:<14} {band:>22} {fmt(e['rollouts_to_target_mean'], '.0f'):>19} "
              f"{fmt(e['rollouts_per_prompt'], '.2f'):>11} {fmt(e['prior_rejected_frac'], '.3f'):>9} "
              f"{fmt(e['rounds_per_step'], '.2f'):>7} {e['wall_seconds_mean']:>7.1f}")  # fmt: skip
    for method in ("v05_history", "v05_oracle"):
        e = summary["methods"].get(method, {})
        if "target_met" in e:
            share = fmt(e["share_of_grpo16_rollouts"], ".2f")
            print(f"{method}: share of GRPO-16's rollouts to reach its final accuracy = {share} "
                  f"(target <= 0.50: {'met' if e['target_met'] else 'MISSED'})")  # fmt: skip

    out = Path(options.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"settings": vars(options), "summary": summary, "runs": runs}
    out.write_text(json.dumps(result, indent=2))
    plot(runs, summary, out.with_suffix(".png"))
    print(f"\nWrote {out} and {out.with_suffix('.png')}")
    return result


if __name__ == "__main__":
    main()
