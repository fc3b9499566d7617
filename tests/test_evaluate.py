import json
import shutil

import pytest
from conftest import load_script

evaluate = load_script("evaluate")


def test_score_counts_avg_and_pass_and_skips_ungradable():
    grades = [[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [None, None, None, None]]
    result = evaluate.score(grades)
    assert result["problems"] == 3 and result["ungradable"] == 1 and result["k"] == 4
    assert result["avg@k"] == pytest.approx((0.25 + 0 + 1) / 3)
    assert result["pass@k"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="gradable"):
        evaluate.score([[None]])


def test_default_k_follows_the_paper():
    assert [evaluate.default_k(b) for b in ("aime24", "aime25", "amc23", "math500")] == [16, 16, 16, 4]


def test_tiny_model_end_to_end_writes_json_and_table_into_the_model_folder(tiny_model_path, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(tiny_model_path, model)
    argv = ["--model", str(model), "--benchmarks", "aime24", "minerva", "--limit", "2", "--k", "2",
            "--max-new-tokens", "4", "--backend", "transformers"]  # fmt: skip
    results = evaluate.main(argv)
    assert json.loads((model / "eval_results.json").read_text()) == results
    assert results["backend"] == "transformers"
    for name in ("aime24", "minerva"):
        row = results["benchmarks"][name]
        assert row["problems"] == 2 and row["k"] == 2 and 0 <= row["avg@k"] <= row["pass@k"] <= 1
    assert "| aime24 | 2 | 2 |" in (model / "eval_results.md").read_text()
    assert "| minerva |" in capsys.readouterr().out
