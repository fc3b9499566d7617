import json

import pytest

from v05_trl.math_data import BENCHMARK_DIR, EVAL_BENCHMARKS
from v05_trl.rewards import grade_answer, last_boxed, math_answer_reward


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("so \\boxed{1} then \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),  # the last box, nested braces kept
        ("\\fbox{7}", "7"),
        ("no box here", None),
        ("cut off \\boxed{\\frac{1}{", None),
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_grade_answer_is_mathematical_equality():
    assert grade_answer("\\frac{1}{2}", "0.5") == 1.0
    assert grade_answer("84, 69", "69,84") == 1.0  # sets in any order
    assert grade_answer("3", "4") == 0.0
    assert grade_answer(None, "4") == 0.0  # no box: wrong, not unscorable
    assert grade_answer("4", "") is None  # a gold answer that does not parse cannot grade


def test_math_answer_reward_on_plain_and_chat_completions():
    logged = {}
    completions = ["\\boxed{12}", [{"role": "assistant", "content": "I think \\boxed{13}"}]]
    rewards = math_answer_reward(completions, ["12", "12"], log_extra=lambda k, v: logged.setdefault(k, v))
    assert rewards == [1.0, 0.0]
    assert logged == {"boxed": ["12", "13"]}


def test_gold_answers_of_every_shipped_benchmark_grade_correct():
    failures, total = [], 0
    for name in (*EVAL_BENCHMARKS, "gsm8k_test"):
        rows = [json.loads(line) for line in (BENCHMARK_DIR / f"{name}.jsonl").read_text().splitlines()]
        rewards = math_answer_reward(
            [f"The answer is \\boxed{{{r['answer']}}}." for r in rows], [r["answer"] for r in rows]
        )
        failures += [(r["id"], r["answer"], x) for r, x in zip(rows, rewards, strict=True) if x != 1.0]
        total += len(rows)
    assert len(failures) <= 0.01 * total, failures
