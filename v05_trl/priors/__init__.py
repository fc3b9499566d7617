"""Value priors: success probabilities for prompts before any rollout, behind one small interface.

``load_prior(spec)`` builds one from a string, for configs and the command line:

| spec | prior |
| --- | --- |
| ``"v0"``, ``"v0:<hub id or folder>"`` | :class:`V0Prior`, the generalist value model (``pip install v05-trl[v0]``) |
| ``"history"`` | :class:`HistoryPrior`, each prompt's own earlier rollouts |
| ``"embedding"``, ``"embedding:<model>"`` | :class:`EmbeddingPrior`, kernel regression on sentence embeddings |
| ``"constant:<p>"`` | :class:`ConstantPrior` |
| ``"column:<name>"`` | :class:`DatasetColumnPrior`, a pass rate in each dataset row |
| ``"none"`` | no prior (``None``): plain GRPO |
| ``"a+b"`` | :class:`FirstOpinionPrior`: for each prompt, the first member with an opinion wins |
"""

from __future__ import annotations

import math
from pathlib import Path

from .base import ContextBuffer, FirstOpinionPrior, InContextPrior, ValuePrior, prompt_to_text
from .constant import ConstantPrior, DatasetColumnPrior
from .embedding import DEFAULT_EMBEDDING_MODEL, EmbeddingPrior
from .history import HistoryPrior
from .v0 import DEFAULT_V0_REPO, V0Prior

__all__ = [
    "VALID_PRIOR_SPECS",
    "ConstantPrior",
    "ContextBuffer",
    "DatasetColumnPrior",
    "EmbeddingPrior",
    "FirstOpinionPrior",
    "HistoryPrior",
    "InContextPrior",
    "V0Prior",
    "ValuePrior",
    "load_prior",
    "prompt_to_text",
]

VALID_PRIOR_SPECS = (
    "v0",
    "v0:<hub id or folder>",
    "history",
    "embedding",
    "embedding:<sentence-transformers model or folder>",
    "constant:<p in [0, 1]>",
    "column:<dataset column>",
    "none",
    "<spec>+<spec> (first prior with an opinion wins)",
)


def _invalid(spec: str, why: str) -> ValueError:
    forms = "\n  ".join(VALID_PRIOR_SPECS)
    return ValueError(f"invalid value_prior {spec!r}: {why}. Valid forms:\n  {forms}")


def load_prior(
    spec: str,
    *,
    context_size: int = 256,
    min_context: int = 64,
    history_decay: float = 0.9,
    context_seed: str | Path | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> ValuePrior | None:
    """Build a prior from its spec string (see the module docstring); ``"none"`` gives ``None``.

    ``context_size``/``min_context`` configure the in-context priors (V0, embedding), ``context_seed`` a JSONL file
    of ``{"prompt", "pass_rate"}`` that fills their context before training, ``history_decay`` the history prior.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise _invalid(str(spec), "expected a non-empty string")
    parts = [p.strip() for p in spec.split("+")]
    if len(parts) > 1:
        if "none" in parts:
            raise _invalid(spec, "'none' cannot be part of a composition")
        options = {
            "context_size": context_size,
            "min_context": min_context,
            "history_decay": history_decay,
            "context_seed": context_seed,
            "device": device,
            "trust_remote_code": trust_remote_code,
        }
        return FirstOpinionPrior([load_prior(part, **options) for part in parts])

    kind, _, argument = spec.strip().partition(":")
    if kind == "none" and not argument:
        return None
    if kind == "history" and not argument:
        return HistoryPrior(decay=history_decay)
    if kind == "constant":
        try:
            p = float(argument)
        except ValueError:
            raise _invalid(spec, "constant needs a number, as in 'constant:0.5'") from None
        if not (math.isnan(p) or 0.0 <= p <= 1.0):
            raise _invalid(spec, "the constant must lie in [0, 1]")
        return ConstantPrior(p)
    if kind == "column":
        if not argument:
            raise _invalid(spec, "column needs a dataset column name, as in 'column:pass_rate'")
        return DatasetColumnPrior(argument)
    if kind == "embedding":
        prior = EmbeddingPrior(
            argument or DEFAULT_EMBEDDING_MODEL, context_size=context_size, min_context=min_context, device=device
        )
    elif kind == "v0":
        prior = V0Prior.from_pretrained(
            argument or DEFAULT_V0_REPO,
            device=device,
            trust_remote_code=trust_remote_code,
            context_size=context_size,
            min_context=min_context,
        )
    else:
        raise _invalid(spec, f"unknown prior {kind!r}")
    if context_seed is not None:
        prior.context.seed_from_jsonl(context_seed)
    return prior
