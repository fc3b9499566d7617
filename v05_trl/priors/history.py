r"""A prior from each prompt's own earlier rollouts: a Beta-Bernoulli posterior with exponential forgetting.

Per prompt (keyed by a SHA-1 of its text), successes and failures are counted with weight ``decay^age``, ``age``
being the number of :meth:`HistoryPrior.update` calls since they were observed (the policy drifts, so old results
count less). With a ``Beta(a0, b0)`` prior on the success probability,

    p_hat = (a0 + S) / (a0 + b0 + S + F),   S = sum_t decay^(T - t) * successes_t,   F likewise for failures.

A prompt never seen has no opinion (NaN): the trainer treats it as plain GRPO. Compare MoPPS (arXiv 2507.04632),
which tracks the same posterior to select prompts.
"""

from __future__ import annotations

import hashlib
import math

import torch

from .base import ValuePrior

__all__ = ["HistoryPrior"]


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class HistoryPrior(ValuePrior):
    """Beta-Bernoulli posterior mean per prompt over its earlier rollouts (``"history"``)."""

    name = "history"

    def __init__(self, decay: float = 0.9, prior_alpha: float = 0.5, prior_beta: float = 0.5) -> None:
        super().__init__()
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"history_decay must lie in (0, 1], got {decay}")
        if prior_alpha <= 0 or prior_beta <= 0:
            raise ValueError("HistoryPrior: prior_alpha and prior_beta must be > 0")
        self.decay, self.prior_alpha, self.prior_beta = decay, prior_alpha, prior_beta
        self.step = 0
        # key -> [successes, failures, step at which they were last decayed]
        self.counts: dict[str, list[float]] = {}

    def _decayed(self, key: str) -> tuple[float, float] | None:
        entry = self.counts.get(key)
        if entry is None:
            return None
        factor = self.decay ** (self.step - entry[2])
        return entry[0] * factor, entry[1] * factor

    def _predict(self, texts, **columns):
        probs = []
        for text in texts:
            counts = self._decayed(_key(text))
            if counts is None:
                probs.append(math.nan)
                continue
            successes, failures = counts
            probs.append((self.prior_alpha + successes) / (self.prior_alpha + self.prior_beta + successes + failures))
        return torch.tensor(probs, dtype=torch.float64)

    def update(self, prompts, pass_rates, num_rollouts):
        texts, rates, counts = self._check_update(prompts, pass_rates, num_rollouts)
        self.step += 1
        for text, rate, n in zip(texts, rates, counts, strict=True):
            key = _key(text)
            successes, failures = self._decayed(key) or (0.0, 0.0)
            self.counts[key] = [successes + rate * n, failures + (1 - rate) * n, self.step]

    def state_dict(self):
        return {"step": self.step, "counts": {k: list(v) for k, v in self.counts.items()}}

    def load_state_dict(self, state):
        self.step = int(state["step"])
        self.counts = {k: [float(v[0]), float(v[1]), int(v[2])] for k, v in state["counts"].items()}

    def __repr__(self) -> str:
        return f"HistoryPrior(decay={self.decay})"
