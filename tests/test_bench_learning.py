import json
from types import SimpleNamespace

import pytest
from conftest import load_script

bench = load_script("bench_learning")


def test_splits_are_disjoint_distinct_and_fixed():
    options = SimpleNamespace(warm_start_problems=50, train_problems=20, test_problems=30)
    splits = bench.make_problems(options)
    assert splits == bench.make_problems(options)
    sets = [set(v) for v in splits.values()]
    assert sum(len(s) for s in sets) == len(set().union(*sets)) == 100
    assert all(2 <= len(t) <= 4 and all(0 <= d <= 9 for d in t) for t in splits["test"])


def test_perturbation_moves_rates_on_the_logit_scale():
    rates = [0.0, 0.2, 0.5, 1.0]
    moved = bench.perturb(rates, noise=0.5, seed=0)
    assert moved == bench.perturb(rates, noise=0.5, seed=0) and moved != bench.perturb(rates, noise=0.5, seed=1)
    assert all(0 < m < 1 for m in moved)
    assert bench.perturb(rates, noise=0.0, seed=0) == pytest.approx([0.01, 0.2, 0.5, 0.99])


def test_rollouts_to_reach_interpolates_between_milestones():
    curve = [(0, 0.2), (100, 0.3), (200, 0.5)]
    assert bench.rollouts_to_reach(curve, 0.4) == pytest.approx(150)
    assert bench.rollouts_to_reach(curve, 0.2) == 0
    assert bench.rollouts_to_reach(curve, 0.6) is None


def test_summary_compares_with_grpo16_final_accuracy():
    def run(method, curve):
        return {"method": method, "curve": curve, "rollouts": curve[-1][0], "wall_seconds": 1.0,
                "rollouts_per_prompt": 4.0, "prior_rejected_frac": None, "rounds_per_step": 0.0,
                "frac_nonzero_advantage": 1.0}  # fmt: skip

    summary = bench.summarize([run("grpo_g16", [(0, 0.2), (1000, 0.4)]), run("v05_history", [(0, 0.2), (400, 0.4)])])
    assert summary["target_accuracy"] == pytest.approx(0.4)
    v05 = summary["methods"]["v05_history"]
    assert v05["rollouts_to_target_mean"] == pytest.approx(400)
    assert v05["share_of_grpo16_rollouts"] == pytest.approx(0.4) and v05["target_met"]


def test_two_step_smoke_of_every_method(tmp_path):
    out = tmp_path / "bench.json"
    argv = ["--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--seeds", "1", "--budget", "16",
            "--evaluations", "1", "--prompts-per-step", "2", "--warm-start-problems", "16", "--train-problems", "8",
            "--test-problems", "8", "--warm-start-steps", "2", "--hidden-size", "32", "--oracle-samples", "2"]  # fmt: skip
    result = bench.main(argv)
    assert json.loads(out.read_text())["summary"] == result["summary"]
    assert out.with_suffix(".png").exists()
    steps = {r["method"]: r["steps"] for r in result["runs"]}
    assert steps["grpo_g4"] == 2 and steps["grpo_g16"] == 1  # the same budget: 2 x 8 rollouts, 1 x 32
    for r in result["runs"]:
        assert r["rollouts"] >= 16 and len(r["curve"]) == 2 and 0 <= r["curve"][-1][1] <= 1
