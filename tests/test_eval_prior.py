"""Smoke test of scripts/eval_prior.py on the small copy of the real pass rates."""

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("eval_prior", ROOT / "scripts" / "eval_prior.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_eval_prior_reports_each_prior_and_protocol(tmp_path):
    script = _load_script()
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
    script = _load_script()
    labels = torch.tensor([0, 0, 1, 1])
    assert script.auc(torch.tensor([0.1, 0.2, 0.8, 0.9]), labels) == 1.0
    assert script.auc(torch.tensor([0.9, 0.8, 0.2, 0.1]), labels) == 0.0
    assert math.isnan(script.auc(torch.tensor([0.1, 0.2]), torch.tensor([1, 1])))
    ece, bins = script.calibration(torch.tensor([0.05, 0.05, 0.95, 0.95]), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    assert ece == pytest.approx(0.05) and [b[2] for b in bins] == [2, 2]
