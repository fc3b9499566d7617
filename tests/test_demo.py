import json

import pytest

from v05_trl import demo


def test_first_number_reward_checks_the_first_integer():
    completions = [" 7 apples", "The answer is 7", " 12", "", [{"role": "assistant", "content": " 7"}]]
    assert demo.first_number_reward(completions, answer=["7", "7", "7", "7", "7"]) == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_arithmetic_splits_are_disjoint_and_verifiable():
    rl, warm = demo.arithmetic_dataset(16)
    assert len(rl) == 16 and len(warm) == 84
    assert not set(rl["prompt"]) & set(warm["prompt"])
    for row in rl:
        a, b = (int(x) for x in row["prompt"].removeprefix("What is ").removesuffix("?").split(" + "))
        assert row["answer"] == str(a + b) and row["completion"] == f" {a + b}"


def test_summary_compares_with_grpo_16():
    history = [
        {"v05/completions": 32, "v05/rollouts_per_prompt/mean": 4.0, "v05/rounds": 0, "reward": 0.0,
         "v05/prior_coverage": 0.0, "v05/prior_rejected_frac": None},
        {"v05/completions": 48, "v05/rollouts_per_prompt/mean": 6.0, "v05/rounds": 1, "reward": 0.5,
         "v05/prior_coverage": 1.0, "v05/prior_rejected_frac": 0.25},
        {"train_runtime": 1.0},
    ]  # fmt: skip
    summary = demo.summarize(history, max_num_generations=16)
    assert summary["completions"] == 80 and summary["completions_at_k_max"] == 16 * 16
    assert summary["rollouts_per_prompt"] == pytest.approx(5.0)
    assert summary["prior_acceptance"] == pytest.approx(0.75)
    assert (summary["reward_first_quarter"], summary["reward_last_quarter"]) == (0.0, 0.5)
    with pytest.raises(ValueError, match="logging_steps"):
        demo.summarize([{"loss": 1.0}], 16)


def test_demo_trains_and_saves_the_model_with_its_card(tmp_path, capsys):
    summary = demo.main(["--output-dir", str(tmp_path), "--max-steps", "3", "--warm-start-steps", "5"])
    assert summary["steps"] == 3
    assert "V0.5 demo summary" in capsys.readouterr().out
    assert (tmp_path / "model.safetensors").exists()
    assert "2603.10848" in (tmp_path / "README.md").read_text()
    assert json.loads((tmp_path / "v05_summary.json").read_text()) == summary
