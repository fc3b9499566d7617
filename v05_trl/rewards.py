r"""The math answer reward, shared by the recipes (training) and ``scripts/evaluate.py`` (grading).

A completion is correct when the content of its **last** ``\boxed{...}`` is mathematically equal to the gold answer
under math-verify (``verify(parse("$gold$"), parse("\boxed{prediction}"))``), each step under a timeout. The reward
is 1.0 or 0.0; ``None`` (TRL: unscorable, zero advantage) when the gold answer itself does not parse.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

__all__ = ["MATH_SYSTEM_PROMPT", "completion_text", "grade_answer", "last_boxed", "math_answer_reward"]

#: System prompt of the recipes and of the evaluation: reason, then give the final answer in \boxed{}.
MATH_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."  # the Qwen math prompt


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, braces balanced; ``None`` if none."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    opening = text.index("{", start)
    depth = 0
    for position in range(opening, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[opening + 1 : position]
    return None  # unbalanced: the completion was cut inside the box


def _timeouts() -> tuple[int | None, int | None]:
    # math-verify times out with signal.alarm, which only works in the main thread; elsewhere, run without.
    if threading.current_thread() is threading.main_thread():
        return 5, 5
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return None, None


def grade_answer(prediction: str | None, gold: str) -> float | None:
    """1.0 if ``prediction`` (a boxed content) equals ``gold`` under math-verify, 0.0 if not, ``None`` if the gold
    answer does not parse (it cannot be graded)."""
    from math_verify import parse, verify

    parsing_timeout, verify_timeout = _timeouts()
    gold_parsed = parse(f"${gold}$", parsing_timeout=parsing_timeout)
    if not gold_parsed:
        return None
    if prediction is None:
        return 0.0
    predicted = parse(f"\\boxed{{{prediction}}}", parsing_timeout=parsing_timeout)
    return float(bool(predicted) and verify(gold_parsed, predicted, timeout_seconds=verify_timeout))


def completion_text(completion) -> str:
    """The text of a completion: a plain string, or the last message of a conversational one."""
    return completion if isinstance(completion, str) else completion[-1]["content"]


def math_answer_reward(
    completions: Sequence,
    answer: Sequence[str],
    log_extra: Callable[[str, list], None] | None = None,
    **kwargs,
) -> list[float | None]:
    r"""TRL reward function: 1.0 when the last ``\boxed{}`` of the completion equals the row's ``answer`` column.

    Works with plain and conversational completions; logs the extracted answer to TRL's completions table.
    """
    predictions = [last_boxed(completion_text(c)) for c in completions]
    if log_extra is not None:
        log_extra("boxed", [p if p is not None else "" for p in predictions])
    return [grade_answer(p, gold) for p, gold in zip(predictions, answer, strict=True)]
