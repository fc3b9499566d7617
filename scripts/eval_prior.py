#!/usr/bin/env python
"""Evaluate value priors on the real pass rates of two real policies at three RL steps.

Two protocols, on ``../shared/data/v0_pass_rates/`` (prompts in ``prompt_dict.json``):

- **intra-policy** (V0's protocol): per (policy, step) task, 256 rows go through ``update`` as context, the rest
  are queries;
- **history**: per policy and pair of steps s1 < s2, ``update`` with every result at s1, query the prompts seen at
  both steps with their results at s2.

Reported per prior and protocol: coverage (share of queries with an opinion), AUC (label pass rate >= 0.5), Brier
score against the true pass rate, expected calibration error (10 bins), and, in the estimator's simulation
(``v05_trl.simulation``, paper settings), the baseline MSE and mean rollouts per prompt the prior gives, next to
GRPO with G = 4 and 16 on the same queries. Writes a table, ``--out`` JSON and a reliability plot (PNG).

    python scripts/eval_prior.py --priors history embedding constant:0.5 --out results/eval_prior.json
    python scripts/eval_prior.py --priors v0:/path/to/Generalist-Value-Model-V0   # where the weights are at hand
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import defaultdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from v05_trl.priors import load_prior
from v05_trl.simulation import draw_rollouts, simulate_grpo, simulate_v05

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "v0_pass_rates"
ROLLOUTS_PER_SCORE = 10  # each score is the mean of about 10 rollouts (see the data README)
CALIBRATION_BINS = 10


def load_rows(data_dir: Path) -> list[dict]:
    """Rows ``{"model", "step", "prompt", "pass_rate"}`` from the V0 pass-rate files."""
    prompts = json.loads((data_dir / "prompt_dict.json").read_text())
    rows = []
    for name in ("context.jsonl", "train.jsonl"):
        path = data_dir / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                key = f"{row['dataset']}_{row['id']}"
                pass_rate = (row["score"] + 1) / 2
                rows.append(
                    {"model": row["model"], "step": row["step"], "prompt": prompts[key], "pass_rate": pass_rate}
                )
    if not rows:
        raise FileNotFoundError(f"no pass-rate files in {data_dir}; pass --data-dir")
    return rows


def intra_policy_tasks(rows, context_size, seed):
    """(name, context rows, query rows) per (policy, step): ``context_size`` random rows of context."""
    groups = defaultdict(list)
    for row in rows:
        groups[(row["model"], row["step"])].append(row)
    rng = random.Random(seed)
    for (model, step), members in sorted(groups.items()):
        members = members[:]
        rng.shuffle(members)
        yield f"{model}@{step}", members[:context_size], members[context_size:]


def history_tasks(rows):
    """(name, earlier rows, later rows of prompts seen before) per policy and pair of steps."""
    by_key = defaultdict(list)
    for row in rows:
        by_key[(row["model"], row["step"])].append(row)
    for model in sorted({m for m, _ in by_key}):
        steps = sorted(s for m, s in by_key if m == model)
        for i, early in enumerate(steps):
            for late in steps[i + 1 :]:
                seen = {r["prompt"] for r in by_key[(model, early)]}
                queries = [r for r in by_key[(model, late)] if r["prompt"] in seen]
                if not queries:
                    continue
                yield f"{model}@{early}->{late}", by_key[(model, early)], queries


def auc(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC AUC through scikit-learn; NaN when only one class is present."""
    from sklearn.metrics import roc_auc_score

    if labels.unique().numel() < 2:
        return math.nan
    return float(roc_auc_score(labels.numpy(), scores.numpy()))


def calibration(probs: torch.Tensor, truth: torch.Tensor) -> tuple[float, list[tuple[float, float, int]]]:
    """Expected calibration error and the bins ``(mean predicted, mean true, count)``."""
    bins = (probs * CALIBRATION_BINS).long().clamp(max=CALIBRATION_BINS - 1)
    table, ece = [], 0.0
    for b in range(CALIBRATION_BINS):
        members = bins == b
        if members.any():
            predicted, actual = float(probs[members].mean()), float(truth[members].mean())
            table.append((predicted, actual, int(members.sum())))
            ece += members.float().mean().item() * abs(predicted - actual)
    return ece, table


def evaluate_prior(prior, tasks, seeds: int):
    """Pool every task's queries: predictions, truths and simulated baseline figures."""
    initial = prior.state_dict() if prior is not None else None
    preds, truths, simulated = [], [], defaultdict(list)
    for _, context, queries in tasks:
        if prior is not None:
            prior.load_state_dict(initial)
            prior.update(
                [r["prompt"] for r in context], [r["pass_rate"] for r in context], [ROLLOUTS_PER_SCORE] * len(context)
            )
            probs = prior.predict([r["prompt"] for r in queries]).double()
        else:
            probs = torch.full((len(queries),), math.nan, dtype=torch.float64)
        truth = torch.tensor([r["pass_rate"] for r in queries], dtype=torch.float64)
        preds.append(probs)
        truths.append(truth)
        for seed in range(seeds):
            rewards = draw_rollouts(truth, 16, (0.0, 1.0), torch.Generator().manual_seed(seed))
            simulated["v05"].append(simulate_v05(rewards, truth, probs, allocation="sequential"))
            simulated["grpo_G4"].append(simulate_grpo(rewards, truth, 4))
            simulated["grpo_G16"].append(simulate_grpo(rewards, truth, 16))
    return torch.cat(preds), torch.cat(truths), simulated


def summarise(spec, protocol, probs, truth, simulated) -> dict:
    has_opinion = ~torch.isnan(probs)
    p, t = probs[has_opinion], truth[has_opinion]
    ece, bins = calibration(p, t) if p.numel() else (math.nan, [])

    def mean(outcomes, field):
        return sum(getattr(o, field) for o in outcomes) / len(outcomes)

    return {
        "prior": spec,
        "protocol": protocol,
        "queries": int(truth.numel()),
        "coverage": float(has_opinion.double().mean()),
        "auc": auc(p, (t >= 0.5).long()) if p.numel() else math.nan,
        "brier": float(((p - t) ** 2).mean()) if p.numel() else math.nan,
        "ece": ece,
        "calibration_bins": bins,
        "v05_mse": mean(simulated["v05"], "mse"),
        "v05_mean_rollouts": mean(simulated["v05"], "mean_rollouts"),
        "v05_frac_prior_rejected": mean(simulated["v05"], "frac_prior_rejected"),
        "grpo4_mse": mean(simulated["grpo_G4"], "mse"),
        "grpo16_mse": mean(simulated["grpo_G16"], "mse"),
    }


def format_table(rows) -> str:
    header = f"{'prior':<28}{'protocol':<14}{'cover':>7}{'AUC':>7}{'Brier':>8}{'ECE':>7}"
    header += f"{'V0.5 MSE':>10}{'rollouts':>10}{'GRPO4':>9}{'GRPO16':>9}"
    lines = [header]
    for r in rows:
        lines.append(
            f"{r['prior']:<28}{r['protocol']:<14}{r['coverage']:>7.2f}{r['auc']:>7.3f}{r['brier']:>8.4f}{r['ece']:>7.3f}"
            f"{r['v05_mse']:>10.5f}{r['v05_mean_rollouts']:>10.2f}{r['grpo4_mse']:>9.5f}{r['grpo16_mse']:>9.5f}"
        )
    return "\n".join(lines)


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    protocols = sorted({r["protocol"] for r in rows})
    fig, axes = plt.subplots(1, len(protocols), figsize=(6 * len(protocols), 5), squeeze=False)
    for ax, protocol in zip(axes[0], protocols, strict=True):
        ax.plot([0, 1], [0, 1], "k--", lw=1, label="perfect calibration")
        for r in rows:
            if r["protocol"] == protocol and r["calibration_bins"]:
                predicted, actual, _ = zip(*r["calibration_bins"], strict=True)
                ax.plot(predicted, actual, "o-", label=f"{r['prior']} (AUC {r['auc']:.2f})")
        ax.set(xlabel="predicted success probability", ylabel="true pass rate", title=f"protocol: {protocol}")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--priors", nargs="+", default=["history", "embedding", "constant:0.5"], help="prior specs")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--context-size", type=int, default=256)
    parser.add_argument("--min-context", type=int, default=64)
    parser.add_argument("--seeds", type=int, default=5, help="simulation seeds per task")
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument(
        "--protocols", nargs="+", default=["intra_policy", "history"], choices=["intra_policy", "history"]
    )
    parser.add_argument("--out", type=Path, default=Path("results/eval_prior.json"))
    parser.add_argument("--plot", type=Path, default=None, help="PNG path (default: --out with .png)")
    args = parser.parse_args(argv)

    data = load_rows(args.data_dir)
    protocols = {
        "intra_policy": lambda: list(intra_policy_tasks(data, args.context_size, args.split_seed)),
        "history": lambda: list(history_tasks(data)),
    }
    rows = []
    for spec in tqdm(args.priors, desc="priors"):
        prior = load_prior(spec, context_size=args.context_size, min_context=args.min_context)
        for protocol in args.protocols:
            probs, truth, simulated = evaluate_prior(prior, protocols[protocol](), args.seeds)
            rows.append(summarise(spec, protocol, probs, truth, simulated))
            if prior is not None:
                rows[-1]["predict_seconds"] = prior.total_predict_seconds

    print(format_table(rows))
    print("Anchor: V0's paper reports intra-policy AUC of about 0.88-0.91 with 256 context items.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    plot_path = args.plot or args.out.with_suffix(".png")
    plot(rows, plot_path)
    print(f"wrote {args.out} and {plot_path}")
    return rows


if __name__ == "__main__":
    main()
