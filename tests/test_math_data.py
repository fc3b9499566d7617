import json

import pytest

from v05_trl.math_data import EVAL_BENCHMARKS, load_math_dataset, math_prompt, shipped_datasets
from v05_trl.rewards import MATH_SYSTEM_PROMPT


def test_the_six_benchmarks_ship_with_their_licenses():
    from v05_trl.math_data import BENCHMARK_DIR

    assert set(EVAL_BENCHMARKS) <= set(shipped_datasets())
    assert len(list((BENCHMARK_DIR / "licenses").glob("*LICENSE*"))) >= 4
    assert "license" in (BENCHMARK_DIR / "README.md").read_text().lower()


def test_shipped_benchmark_as_chat_and_plain_prompts():
    chat = load_math_dataset("amc23", limit=2)
    assert sorted(chat.column_names) == ["answer", "prompt"] and len(chat) == 2
    assert chat[0]["prompt"][0] == {"role": "system", "content": MATH_SYSTEM_PROMPT}
    plain = load_math_dataset("amc23", chat=False, limit=1)
    assert plain[0]["prompt"].endswith(MATH_SYSTEM_PROMPT)
    assert math_prompt("1+1?", chat=True, system_prompt=None) == [{"role": "user", "content": "1+1?"}]


def test_local_file_with_nested_answer_and_chat_problem(tmp_path):
    path = tmp_path / "dapo_like.jsonl"
    row = {"prompt": [{"role": "user", "content": "What is 2+2?"}], "reward_model": {"ground_truth": "4"}}
    path.write_text(json.dumps(row) + "\n")
    dataset = load_math_dataset(str(path), problem_column="prompt", answer_column="reward_model.ground_truth")
    assert dataset[0]["answer"] == "4"
    assert dataset[0]["prompt"][-1] == {"role": "user", "content": "What is 2+2?"}
    with pytest.raises(ValueError, match="'question'"):
        load_math_dataset(str(path), problem_column="question")
    with pytest.raises(FileNotFoundError):
        load_math_dataset(str(tmp_path / "missing.jsonl"))
