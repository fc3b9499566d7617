"""Priors that need nothing: a constant, or a pass rate precomputed in each dataset row."""

from __future__ import annotations

import math

import torch

from .base import ValuePrior

__all__ = ["ConstantPrior", "DatasetColumnPrior"]


class ConstantPrior(ValuePrior):
    """The same success probability ``p`` for every prompt (``"constant:0.5"``); NaN gives plain GRPO."""

    name = "constant"

    def __init__(self, p: float) -> None:
        super().__init__()
        p = float(p)
        if not (math.isnan(p) or 0.0 <= p <= 1.0):
            raise ValueError(f"ConstantPrior: p must lie in [0, 1] (or be NaN for no opinion), got {p}")
        self.p = p

    def _predict(self, texts, **columns):
        return torch.full((len(texts),), self.p)

    def __repr__(self) -> str:
        return f"ConstantPrior({self.p})"


class DatasetColumnPrior(ValuePrior):
    """A pass rate stored in each dataset row (``"column:<name>"``), e.g. from an offline pass of V0.

    Values must lie in [0, 1]; ``None`` or NaN in a row means no opinion for that prompt.
    """

    name = "column"

    def __init__(self, column: str) -> None:
        super().__init__()
        if not column:
            raise ValueError("DatasetColumnPrior needs a column name, as in 'column:pass_rate'")
        self.column = column

    def _predict(self, texts, **columns):
        if self.column not in columns:
            raise KeyError(
                f"value_prior 'column:{self.column}' needs the dataset column {self.column!r}; the batch has "
                f"{sorted(columns) or 'no extra columns'}"
            )
        values = [math.nan if v is None else float(v) for v in columns[self.column]]
        if len(values) != len(texts):
            raise ValueError(f"column {self.column!r} has {len(values)} values for {len(texts)} prompts")
        probs = torch.tensor(values, dtype=torch.float32)
        if ((probs < 0) | (probs > 1)).any():
            raise ValueError(f"dataset column {self.column!r} must hold pass rates in [0, 1] (or None)")
        return probs

    def __repr__(self) -> str:
        return f"DatasetColumnPrior({self.column!r})"
