"""Smoke test of the baseline benchmark on a small copy of the real pass rates."""

import json

import pytest
import torch
from conftest import ROOT, load_script

from v05_trl.simulation import draw_rollouts, simulate_grpo, simulate_v05


def test_bench_baseline_writes_rows_and_plot(tmp_path, capsys):
    bench = load_script("bench_baseline")
    out = tmp_path / "bench.json"
    bench.main(["--data-dir", str(ROOT / "tests" / "data"), "--seeds", "2", "--out", str(out)])
    rows = json.loads(out.read_text())
    assert (tmp_path / "bench.png").stat().st_size > 0
    required = {"method", "prior", "noise_model", "mean_rollouts", "mse", "frac_prior_rejected"}
    assert all(required | {"frac_nonzero_advantage"} <= row.keys() for row in rows)
    methods = {row["method"] for row in rows}
    assert {"grpo_G4", "grpo_G16", "prior_only", "v05_osla_sequential", "v05_osla_planned"} <= methods
    grpo = {row["method"]: row for row in rows if row["method"].startswith("grpo")}
    assert grpo["grpo_G16"]["mse"] < grpo["grpo_G4"]["mse"]  # more rollouts, better mean
    assert all(4 <= row["mean_rollouts"] <= 16 for row in rows if row["method"].startswith("v05_osla"))
    printed = capsys.readouterr().out
    assert "grpo_G16" in printed and ("[MET]" in printed or "[MISSED]" in printed)


def test_simulation_grpo_mse_matches_bernoulli_variance():
    # The MSE of a G-rollout mean is p (1 - p) / G on average.
    pass_rates = torch.full((20000,), 0.3, dtype=torch.float64)
    rewards = draw_rollouts(pass_rates, 16, (0, 1), torch.Generator().manual_seed(0))
    for g in (2, 4, 16):
        assert simulate_grpo(rewards, pass_rates, g).mse == pytest.approx(0.21 / g, rel=0.05)


def test_simulation_v05_with_an_exact_prior_accepts_it_and_draws_little():
    pass_rates = torch.rand(5000, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    rewards = draw_rollouts(pass_rates, 16, (0, 1), torch.Generator().manual_seed(2))
    exact = simulate_v05(rewards, pass_rates, pass_rates, allocation="sequential")
    useless = simulate_v05(rewards, pass_rates, 1 - pass_rates, allocation="sequential")
    assert exact.mse < 0.2 * useless.mse
    assert exact.frac_prior_rejected < useless.frac_prior_rejected
    assert exact.mean_rollouts < useless.mean_rollouts
