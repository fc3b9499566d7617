"""Smoke test of scripts/eval_prior.py on the small copy of the real pass rates."""

import json
import math

import pytest
import torch
from conftest import ROOT, load_script


def test_eval_prior_reports_each_prior_and_protocol(tmp_path):
    script = load_script("eval_prior")
    out = tmp_path / "eval.json"
    argv = ["--data-dir", str(ROOT / "tests" / "data"), "--priors", "history", "constant:0.5"]
    argv += ["--context-size", "16", "--min-context", "4", "--seeds", "1", "--out", str(out)]
    script.main(argv)
    rows = {(r["prior"], r["protocol"]): r for r in json.loads(out.read_text())}
    assert set(rows) == {(p, q) for p in ("history", "constant:0.5") for q in ("intra_policy", "history")}
    assert rows[("history", "intra_policy")]["coverage"] == 0.0  # unseen prompts: no opinion
    constant = rows[("constant:0.5", "intra_policy")]
    assert constant["coverage"] == 1.0 and constant["auc"] == 0.5
    assert (tmp_path / "eval.png").stat().st_size > 0


def test_metrics():
    script = load_script("eval_prior")
    labels = torch.tensor([0, 0, 1, 1])
    assert script.auc(torch.tensor([0.1, 0.2, 0.8, 0.9]), labels) == 1.0
    assert script.auc(torch.tensor([0.9, 0.8, 0.2, 0.1]), labels) == 0.0
    assert math.isnan(script.auc(torch.tensor([0.1, 0.2]), torch.tensor([1, 1])))
    ece, bins = script.calibration(torch.tensor([0.05, 0.05, 0.95, 0.95]), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    assert ece == pytest.approx(0.05) and [b[2] for b in bins] == [2, 2]
