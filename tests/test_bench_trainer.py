import json

import pytest
from conftest import load_script

bench = load_script("bench_trainer")


def row(completions, step, generation):
    return {
        "completions_per_step": completions,
        "step_seconds": step,
        "generation_seconds": generation,
        "outside_generation_seconds": step - generation,
    }


def test_targets_compare_per_completion_and_against_grpo16():
    rows = {
        "grpo_g4": row(32, 0.3, 0.1),
        "grpo_g16": row(128, 1.0, 0.4),
        "v05": row(40, 0.45, 0.1),  # 0.35 s outside for 40 completions
        "grpo_matched": row(40, 0.4, 0.1),  # 0.30 s outside for 40 completions
    }
    targets = bench.check_targets(rows)
    assert targets["outside_generation_overhead"] == pytest.approx(0.35 / 0.30 - 1)
    assert not targets["outside_generation_target_met"]
    assert targets["step_time_vs_grpo16"] == pytest.approx(0.45)
    assert targets["step_time_target_met"]


def test_bench_runs_end_to_end_and_writes_json_and_plot(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["--out", str(out), "--steps", "2", "--warmup-steps", "1", "--prompts-per-step", "2", "--num-prompts", "4",
            "--max-completion-length", "4", "--warm-start-steps", "0", "--hidden-size", "32", "--num-layers", "1"]  # fmt: skip
    result = bench.main(argv)
    assert json.loads(out.read_text()) == result
    assert out.with_suffix(".png").exists()
    methods = result["methods"]
    assert set(methods) == {"grpo_g4", "grpo_g16", "v05", "grpo_matched"}
    assert methods["grpo_g16"]["completions_per_step"] == 2 * 16
    assert all(m["steps"] == 2 and m["step_seconds"] >= m["generation_seconds"] > 0 for m in methods.values())
    assert "V0.5 step time / GRPO-16 step time" in capsys.readouterr().out
