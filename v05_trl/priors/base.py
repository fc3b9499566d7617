"""The value-prior interface: what the trainer asks of any prior, and the pieces several priors share.

A prior predicts, for each prompt and before any rollout, the probability that the *current* policy succeeds on it,
and learns from the policy's fresh results after each step. The estimator turns that probability into a baseline
(``v05_trl.estimator.prior_to_reward_scale``); NaN means "no opinion", and that prompt is trained as plain GRPO.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["ContextBuffer", "FirstOpinionPrior", "InContextPrior", "ValuePrior", "prompt_to_text"]


def prompt_to_text(prompt: str | Sequence[Mapping[str, Any]]) -> str:
    """The text a prior sees of a prompt: the string itself, or a conversation's user turns joined by newlines.

    System prompts are left out on purpose: they are the same for every prompt of a run and carry no information
    about the prompt's difficulty, while they would dominate text embeddings.
    """
    if isinstance(prompt, str):
        return prompt
    turns = [m["content"] for m in prompt if m.get("role") == "user"] or [m["content"] for m in prompt]
    return "\n".join(t if isinstance(t, str) else json.dumps(t) for t in turns)


def _as_list(values, name: str, length: int) -> list:
    values = values.tolist() if isinstance(values, torch.Tensor) else list(values)
    if len(values) != length:
        raise ValueError(f"{name} has {len(values)} entries for {length} prompts")
    return values


class ValuePrior(ABC):
    """Base class of every value prior.

    Subclasses implement :meth:`_predict` (and, if they learn, :meth:`update`, :meth:`state_dict` and
    :meth:`load_state_dict`). :meth:`predict` checks shapes and ranges and records its own cost in
    ``last_predict_seconds`` and ``total_predict_seconds``, which the trainer logs.
    """

    #: Short name used in logs and model cards.
    name: str = "prior"

    def __init__(self) -> None:
        self.last_predict_seconds = 0.0
        self.total_predict_seconds = 0.0

    def predict(self, prompts: Sequence, **columns: Sequence) -> torch.Tensor:
        """Success probabilities in [0, 1] for ``prompts`` (strings or conversations), NaN where no opinion.

        ``columns`` are the batch's dataset columns (name -> one value per prompt), for priors that read them.
        Returns a float32 CPU tensor of shape ``[len(prompts)]``.
        """
        start = time.perf_counter()
        texts = [prompt_to_text(p) for p in prompts]
        probs = torch.as_tensor(self._predict(texts, **columns), dtype=torch.float32).detach().cpu().reshape(-1)
        if probs.numel() != len(texts):
            raise RuntimeError(f"{type(self).__name__} returned {probs.numel()} predictions for {len(texts)} prompts")
        if ((probs < 0) | (probs > 1)).any():
            raise RuntimeError(f"{type(self).__name__} returned probabilities outside [0, 1]")
        self.last_predict_seconds = time.perf_counter() - start
        self.total_predict_seconds += self.last_predict_seconds
        return probs

    @abstractmethod
    def _predict(self, texts: list[str], **columns: Sequence) -> torch.Tensor:
        """Probabilities for prompt texts; see :meth:`predict`."""

    def update(self, prompts: Sequence, pass_rates: Sequence[float], num_rollouts: Sequence[int]) -> None:  # noqa: B027
        """Learn from the policy's fresh results: each prompt's pass rate over ``num_rollouts`` rollouts.

        The default does nothing (a frozen prior).
        """

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to continue with the same prior state (plain Python types)."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:  # noqa: B027
        """Restore what :meth:`state_dict` returned."""

    def _check_update(self, prompts, pass_rates, num_rollouts) -> tuple[list[str], list[float], list[int]]:
        texts = [prompt_to_text(p) for p in prompts]
        rates = [float(r) for r in _as_list(pass_rates, "pass_rates", len(texts))]
        counts = [int(n) for n in _as_list(num_rollouts, "num_rollouts", len(texts))]
        if any(not 0.0 <= r <= 1.0 for r in rates):
            raise ValueError("pass_rates must lie in [0, 1]")
        if any(n < 1 for n in counts):
            raise ValueError("num_rollouts must be >= 1")
        return texts, rates, counts

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FirstOpinionPrior(ValuePrior):
    """A composition such as ``"history+v0"``: for each prompt, the first prior that has an opinion wins.

    Every member is updated with every result, so a later member keeps learning while an earlier one answers.
    """

    def __init__(self, priors: Sequence[ValuePrior]) -> None:
        super().__init__()
        if len(priors) < 2:
            raise ValueError("FirstOpinionPrior needs at least two priors")
        self.priors = list(priors)
        self.name = "+".join(p.name for p in self.priors)

    def _predict(self, texts, **columns):
        probs = self.priors[0].predict(texts, **columns)
        for prior in self.priors[1:]:
            missing = torch.isnan(probs)
            if not missing.any():
                break
            keep = missing.tolist()
            subset = [t for t, m in zip(texts, keep, strict=True) if m]
            sub_columns = {k: [v for v, m in zip(vs, keep, strict=True) if m] for k, vs in columns.items()}
            probs[missing] = prior.predict(subset, **sub_columns)
        return probs

    def update(self, prompts, pass_rates, num_rollouts):
        for prior in self.priors:
            prior.update(prompts, pass_rates, num_rollouts)

    def state_dict(self):
        return {"priors": [p.state_dict() for p in self.priors]}

    def load_state_dict(self, state):
        states = state["priors"]
        if len(states) != len(self.priors):
            raise ValueError(f"state holds {len(states)} priors, this composition has {len(self.priors)}")
        for prior, sub_state in zip(self.priors, states, strict=True):
            prior.load_state_dict(sub_state)

    def __repr__(self) -> str:
        return f"FirstOpinionPrior({self.priors!r})"


class ContextBuffer:
    """Rolling buffer of the policy's most recent ``(prompt, pass_rate)`` results, the context of in-context priors.

    Holds at most ``max_size`` entries, oldest dropped first. Updates are deterministic, so ranks that apply the
    same (gathered) updates hold the same buffer.
    """

    def __init__(self, max_size: int = 256) -> None:
        if max_size < 1:
            raise ValueError(f"prior_context_size must be >= 1, got {max_size}")
        self.entries: deque[tuple[str, float]] = deque(maxlen=max_size)

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, texts: Sequence[str], pass_rates: Sequence[float]) -> None:
        self.entries.extend(zip(texts, (float(r) for r in pass_rates), strict=True))

    @property
    def texts(self) -> list[str]:
        return [t for t, _ in self.entries]

    @property
    def pass_rates(self) -> list[float]:
        return [r for _, r in self.entries]

    def seed_from_jsonl(self, path: str | Path) -> None:
        """Fill the buffer from a JSONL file of ``{"prompt": ..., "pass_rate": ...}`` lines."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"prior context seed file not found: {path}")
        texts, rates = [], []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if "prompt" not in row or "pass_rate" not in row:
                raise ValueError(f"{path}:{number}: each line needs 'prompt' and 'pass_rate'")
            if not 0.0 <= float(row["pass_rate"]) <= 1.0:
                raise ValueError(f"{path}:{number}: pass_rate must lie in [0, 1]")
            texts.append(prompt_to_text(row["prompt"]))
            rates.append(float(row["pass_rate"]))
        self.add(texts, rates)

    def state_dict(self) -> dict[str, Any]:
        return {"max_size": self.entries.maxlen, "texts": self.texts, "pass_rates": self.pass_rates}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.entries = deque(zip(state["texts"], state["pass_rates"], strict=True), maxlen=state["max_size"])


class InContextPrior(ValuePrior):
    """Base of priors that predict from a rolling context of the policy's recent results (V0, embedding).

    ``update`` appends to the context; the context is the whole learned state. Subclasses check
    :attr:`has_context` in ``_predict`` and answer NaN (no opinion) until it holds ``min_context`` results.
    """

    def __init__(self, context_size: int = 256, min_context: int = 64) -> None:
        super().__init__()
        if min_context < 1 or min_context > context_size:
            raise ValueError(
                f"prior_min_context must lie in [1, prior_context_size={context_size}], got {min_context}"
            )
        self.context = ContextBuffer(context_size)
        self.min_context = min_context

    @property
    def has_context(self) -> bool:
        return len(self.context) >= self.min_context

    def update(self, prompts, pass_rates, num_rollouts):
        texts, rates, _ = self._check_update(prompts, pass_rates, num_rollouts)
        self.context.add(texts, rates)

    def state_dict(self):
        return {"context": self.context.state_dict()}

    def load_state_dict(self, state):
        self.context.load_state_dict(state["context"])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(context={len(self.context)}/{self.context.entries.maxlen})"
