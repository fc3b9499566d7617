"""Math problems for the recipes and the evaluation: loading (shipped benchmark, local file or Hub id) and prompts.

Every loader returns a ``datasets.Dataset`` with a ``prompt`` column (plain text or a chat conversation, with the
system prompt asking for the final answer in ``\\boxed{}``) and an ``answer`` column (the gold final answer), which
:func:`v05_trl.rewards.math_answer_reward` reads.
"""

from __future__ import annotations

from pathlib import Path

from .rewards import MATH_SYSTEM_PROMPT

__all__ = ["BENCHMARK_DIR", "EVAL_BENCHMARKS", "load_math_dataset", "math_prompt", "shipped_datasets"]

#: The shipped JSONL files (``{"id", "problem", "answer", "source"}``) and their licenses.
BENCHMARK_DIR = Path(__file__).resolve().parent / "data" / "math"
#: The six benchmarks the paper reports.
EVAL_BENCHMARKS = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench")


def shipped_datasets() -> list[str]:
    return sorted(path.stem for path in BENCHMARK_DIR.glob("*.jsonl"))


def math_prompt(problem: str, chat: bool = True, system_prompt: str | None = MATH_SYSTEM_PROMPT):
    """A chat conversation (system + user), or with ``chat=False`` plain text ending with the instruction."""
    if not chat:
        return f"{problem}\n{system_prompt}" if system_prompt else problem
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*messages, {"role": "user", "content": problem}]


def _get(row: dict, column: str):
    # Dotted paths reach into nested columns, e.g. DAPO-Math-17k's "reward_model.ground_truth".
    value = row
    for part in column.split("."):
        value = value[part]
    return value


def _problem_text(value) -> str:
    # A chat-formatted source prompt (a list of messages) contributes its last user message.
    if isinstance(value, list):
        return next(m["content"] for m in reversed(value) if m.get("role") == "user")
    return str(value)


def load_math_dataset(
    name_or_path: str,
    *,
    split: str = "train",
    config_name: str | None = None,
    problem_column: str = "problem",
    answer_column: str = "answer",
    chat: bool = True,
    system_prompt: str | None = MATH_SYSTEM_PROMPT,
    limit: int | None = None,
):
    """Load math problems as ``prompt``/``answer`` rows.

    ``name_or_path``: a shipped dataset name (see :func:`shipped_datasets`), a local ``.jsonl``/``.json``/``.parquet``
    file, or a Hub dataset id (with ``split`` and ``config_name``). ``problem_column``/``answer_column`` name the
    source columns (dotted paths for nested ones). ``limit`` keeps the first rows.
    """
    from datasets import load_dataset

    path = Path(name_or_path)
    if name_or_path in shipped_datasets():
        dataset = load_dataset("json", data_files=str(BENCHMARK_DIR / f"{name_or_path}.jsonl"), split="train")
    elif path.suffix in (".jsonl", ".json", ".parquet"):
        if not path.exists():
            raise FileNotFoundError(f"dataset file {path} does not exist")
        kind = "parquet" if path.suffix == ".parquet" else "json"
        dataset = load_dataset(kind, data_files=str(path), split="train")
    else:
        dataset = load_dataset(name_or_path, config_name, split=split)
    if limit is not None:
        dataset = dataset.select(range(min(limit, len(dataset))))
    first = dataset[0] if len(dataset) else {}
    for column in (problem_column, answer_column):
        try:
            _get(first, column)
        except (KeyError, TypeError):
            raise ValueError(
                f"{name_or_path} has no column {column!r} (columns: {dataset.column_names}); set problem_column / "
                "answer_column"
            ) from None

    def to_row(row):
        problem = _problem_text(_get(row, problem_column))
        return {"prompt": math_prompt(problem, chat, system_prompt), "answer": str(_get(row, answer_column))}

    return dataset.map(to_row, remove_columns=dataset.column_names)
