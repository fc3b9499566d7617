#!/usr/bin/env python
"""Baseline benchmark: GRPO against V0.5 on the real pass rates of two real policies.

For each of the 3264 (prompt, policy, step) rows in ``../shared/data/v0_pass_rates/`` the true pass rate is
``(score + 1) / 2``. Each seed draws 16 Bernoulli rollouts per row and priors of graded quality, then every method
estimates each row's baseline from its own share of those rollouts. Reported per method: baseline MSE against the
true mean reward, rollouts per prompt, share of priors rejected, share of completions with a nonzero advantage.

    python scripts/bench_baseline.py --out results/bench_baseline.json   # table, JSON and a PNG beside it
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch
from tqdm.auto import tqdm

from v05_trl.simulation import draw_rollouts, simulate_grpo, simulate_prior_only, simulate_v05

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "v0_pass_rates"
PASS_RATE_FILES = ("context.jsonl", "train.jsonl")
LOGIT_NOISES = (0.25, 0.5, 1.0, 2.0)
# Clip true pass rates away from 0 and 1 before taking logits, so that a noisy prior of an all-fail or all-pass
# prompt is not exactly right by construction.
LOGIT_CLIP = 0.01
GRPO_GROUP_SIZES = (2, 4, 8, 16)
FIXED_KS = (4, 8)
NOISE_MODELS = ("worst_case", "prior")


def load_pass_rates(data_dir: Path) -> torch.Tensor:
    """All rows' pass rates ``(score + 1) / 2`` from the V0 pass-rate files, as a float64 tensor."""
    files = [data_dir / name for name in PASS_RATE_FILES if (data_dir / name).exists()]
    if not files:
        raise FileNotFoundError(f"no {' or '.join(PASS_RATE_FILES)} in {data_dir}; pass --data-dir")
    scores = [json.loads(line)["score"] for path in files for line in path.read_text().splitlines() if line.strip()]
    return (torch.tensor(scores, dtype=torch.float64) + 1) / 2


def make_priors(pass_rates: torch.Tensor, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Priors of graded quality: noisy logits, a prior that hallucinates on 10% of prompts, and a useless one."""
    logits = torch.logit(pass_rates.clamp(LOGIT_CLIP, 1 - LOGIT_CLIP))
    noise = torch.randn(pass_rates.shape, generator=generator, dtype=torch.float64)
    priors = {f"logit_noise_{s:g}": torch.sigmoid(logits + s * noise) for s in LOGIT_NOISES}
    uniform = torch.rand(pass_rates.shape, generator=generator, dtype=torch.float64)
    hallucinated = torch.rand(pass_rates.shape, generator=generator, dtype=torch.float64) < 0.10
    priors["hallucinate_10pct"] = torch.where(hallucinated, uniform, priors["logit_noise_0.5"])
    priors["useless_uniform"] = torch.rand(pass_rates.shape, generator=generator, dtype=torch.float64)
    return priors


def run_seed(pass_rates, seed, *, k_init, k_max, rollout_cost, reward_range, priors=None):
    """All methods on one seed's draws; returns ``{(method, prior, noise_model): BaselineOutcome}``.

    ``priors`` maps names to ``[P]`` prior probabilities; by default the graded synthetic priors.
    """
    generator = torch.Generator().manual_seed(seed)
    lo, hi = reward_range
    rewards = draw_rollouts(pass_rates, max(k_max, *GRPO_GROUP_SIZES), reward_range, generator)
    true_mean = lo + (hi - lo) * pass_rates
    priors = make_priors(pass_rates, generator) if priors is None else priors
    results = {(f"grpo_G{g}", "-", "-"): simulate_grpo(rewards, true_mean, g) for g in GRPO_GROUP_SIZES}
    settings = {"k_max": k_max, "rollout_cost": rollout_cost, "reward_range": reward_range}
    for prior_name, prior in priors.items():
        results[("prior_only", prior_name, "-")] = simulate_prior_only(rewards, true_mean, prior, k_init, reward_range)
        for noise_model in NOISE_MODELS:
            for k in FIXED_KS:
                results[(f"v05_fixed_k{k}", prior_name, noise_model)] = simulate_v05(
                    rewards, true_mean, prior, k_init=k, noise_model=noise_model, allocation="fixed", **settings
                )
            osla = {"k_init": k_init, "noise_model": noise_model, **settings}
            sequential = simulate_v05(rewards, true_mean, prior, allocation="sequential", **osla)
            results[("v05_osla_sequential", prior_name, noise_model)] = sequential
            results[("v05_osla_planned", prior_name, noise_model)] = simulate_v05(
                rewards, true_mean, prior, allocation="planned", **osla
            )
            # The planned allocation given exactly the extra rollouts that sequential OSLA drew on these draws.
            matched_budget = round((sequential.mean_rollouts - k_init) * len(pass_rates))
            results[("v05_osla_planned_matched", prior_name, noise_model)] = simulate_v05(
                rewards, true_mean, prior, allocation="planned", budget=matched_budget, **osla
            )
    return results


def aggregate(per_seed: list[dict]) -> list[dict]:
    """Average each method's figures over seeds; ``mse_std`` is the spread of the per-seed MSE."""
    rows = []
    for key in per_seed[0]:
        outcomes = [seed_results[key] for seed_results in per_seed]
        mses = torch.tensor([o.mse for o in outcomes])
        row = {"method": key[0], "prior": key[1], "noise_model": key[2]}
        for field in outcomes[0]._fields:
            row[field] = sum(getattr(o, field) for o in outcomes) / len(outcomes)
        row["mse_std"] = float(mses.std()) if len(outcomes) > 1 else 0.0
        row["seeds"] = len(outcomes)
        rows.append(row)
    return rows


def find(rows, method, prior="-", noise_model="-"):
    return next(r for r in rows if (r["method"], r["prior"], r["noise_model"]) == (method, prior, noise_model))


def check_targets(rows: list[dict]) -> list[tuple[str, bool, str]]:
    """The issue's three targets: (description, met, figures)."""
    checks = []
    grpo16, grpo4 = find(rows, "grpo_G16"), find(rows, "grpo_G4")
    for allocation in ("sequential", "planned"):
        v05 = find(rows, f"v05_osla_{allocation}", "logit_noise_0.5", "worst_case")
        met = v05["mse"] < grpo16["mse"] and v05["mean_rollouts"] <= 5
        checks.append(
            (
                f"logit-0.5 prior, {allocation} OSLA: MSE < GRPO-16 with <= 5 rollouts/prompt",
                met,
                f"MSE {v05['mse']:.5f} vs {grpo16['mse']:.5f}, {v05['mean_rollouts']:.2f} rollouts",
            )
        )
    for allocation in ("sequential", "planned"):
        for noise_model in NOISE_MODELS:
            v05 = find(rows, f"v05_osla_{allocation}", "useless_uniform", noise_model)
            checks.append(
                (
                    f"useless prior, {allocation} OSLA, {noise_model}: MSE <= GRPO-4",
                    v05["mse"] <= grpo4["mse"],
                    f"MSE {v05['mse']:.5f} vs {grpo4['mse']:.5f}, {v05['mean_rollouts']:.2f} rollouts",
                )
            )
    for row in rows:
        if not row["method"].startswith("v05_osla_planned"):
            continue
        sequential = find(rows, "v05_osla_sequential", row["prior"], row["noise_model"])
        excess = row["mse"] / sequential["mse"] - 1
        met = excess <= 0.05 and row["mean_rollouts"] <= sequential["mean_rollouts"]
        checks.append(
            (
                f"{row['method']} within 5% of sequential MSE at no more rollouts "
                f"({row['prior']}, {row['noise_model']})",
                met,
                f"MSE {100 * excess:+.1f}%, rollouts {row['mean_rollouts']:.2f} vs {sequential['mean_rollouts']:.2f}",
            )
        )
    return checks


def format_table(rows: list[dict]) -> str:
    header = ("method", "prior", "noise", "rollouts", "MSE", "+-seeds", "rejected", "adv!=0")
    lines = [f"{header[0]:<26}{header[1]:<19}{header[2]:<11}" + "".join(f"{h:>10}" for h in header[3:])]
    for r in rows:
        rejected = "-" if math.isnan(r["frac_prior_rejected"]) else f"{r['frac_prior_rejected']:.3f}"
        lines.append(
            f"{r['method']:<26}{r['prior']:<19}{r['noise_model']:<11}{r['mean_rollouts']:>10.2f}{r['mse']:>10.5f}"
            f"{r['mse_std']:>10.5f}{rejected:>10}{r['frac_nonzero_advantage']:>10.3f}"
        )
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(NOISE_MODELS), figsize=(13, 5), sharey=True)
    grpo = [r for r in rows if r["method"].startswith("grpo")]
    priors = sorted({r["prior"] for r in rows if r["prior"] != "-"})
    colors = dict(zip(priors, plt.cm.tab10.colors, strict=False))
    markers = {
        "v05_fixed_k4": "s",
        "v05_fixed_k8": "D",
        "v05_osla_sequential": "o",
        "v05_osla_planned": "^",
        "v05_osla_planned_matched": "v",
    }
    for ax, noise_model in zip(axes, NOISE_MODELS, strict=True):
        ax.plot([r["mean_rollouts"] for r in grpo], [r["mse"] for r in grpo], "k-o", label="GRPO (G = 2, 4, 8, 16)")
        for r in rows:
            if r["noise_model"] == noise_model and r["method"] in markers:
                ax.scatter(r["mean_rollouts"], r["mse"], color=colors[r["prior"]], marker=markers[r["method"]], s=30)
        for prior in priors:
            ax.scatter([], [], color=colors[prior], label=prior)
        for method, marker in markers.items():
            ax.scatter([], [], color="gray", marker=marker, label=method)
        ax.set(xscale="log", yscale="log", xlabel="mean rollouts per prompt", title=f"noise model: {noise_model}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("baseline MSE vs true mean reward")
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA, help="folder with context.jsonl/train.jsonl")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--k-init", type=int, default=4)
    parser.add_argument("--k-max", type=int, default=16)
    parser.add_argument("--rollout-cost", type=float, default=1 / 256)
    parser.add_argument("--reward-range", type=float, nargs=2, default=(0.0, 1.0), metavar=("LO", "HI"))
    parser.add_argument("--out", type=Path, default=Path("results/bench_baseline.json"), help="JSON list of rows")
    parser.add_argument("--plot", type=Path, default=None, help="PNG path (default: --out with .png)")
    args = parser.parse_args(argv)

    pass_rates = load_pass_rates(args.data_dir)
    settings = {
        "k_init": args.k_init,
        "k_max": args.k_max,
        "rollout_cost": args.rollout_cost,
        "reward_range": tuple(args.reward_range),
    }
    per_seed = [run_seed(pass_rates, seed, **settings) for seed in tqdm(range(args.seeds), desc="seeds")]
    rows = aggregate(per_seed)

    print(f"{len(pass_rates)} prompts x {args.seeds} seeds, reward range {settings['reward_range']}")
    print(format_table(rows))
    print()
    for description, met, figures in check_targets(rows):
        print(f"[{'MET' if met else 'MISSED'}] {description}: {figures}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))
    plot_path = args.plot or args.out.with_suffix(".png")
    plot(rows, plot_path)
    print(f"wrote {args.out} and {plot_path}")
    return rows


if __name__ == "__main__":
    main()
