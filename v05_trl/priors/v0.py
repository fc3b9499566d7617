"""V0, the generalist value model (arXiv 2602.03584), as a value prior.

V0 reads a policy's capability from its own recent results, in context, with no training during RL:

    prompt --Qwen3-Embedding-0.6B--> token states [T, H]
           --dynamic query adapter--> 168 queries x 6 dims = 1008 features
           --TabPFN v2.5 classifier, fit on the context set (features, pass_rate >= 0.5)--> P(success)

The dynamic query adapter has 168 static queries plus a delta generated from the last-token pooled state
(``Linear(H, 128) -> LayerNorm -> GELU -> Dropout -> Linear(128, 168 * 6)``), and 3-head attention of the queries
(after ``ln_q``) over the projected token states (``proj_kv``, keys after ``ln_kv``). This module is written anew
from the paper's description and the public reference (``Now-Join-Us/V0``, ``v0_core/models/v0.py``); its parameter
names match the published checkpoint's ``model_state_dict`` (``adapter_layer.*``, optionally ``backbone.*``), so
the weights in ``Now-Join-Us/Generalist-Value-Model-V0`` load into it.

Loading is safe by default: the checkpoint is read with ``torch.load(weights_only=True)`` (no code runs from a
downloaded file) and the backbone without ``trust_remote_code`` unless asked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from .base import InContextPrior

__all__ = [
    "DEFAULT_V0_BACKBONE",
    "DEFAULT_V0_REPO",
    "DynamicQueryAdapter",
    "V0Embedder",
    "V0Prior",
    "load_v0_checkpoint",
]

DEFAULT_V0_REPO = "Now-Join-Us/Generalist-Value-Model-V0"
DEFAULT_V0_BACKBONE = "Qwen/Qwen3-Embedding-0.6B"
CHECKPOINT_FILE = "v_0_for_grpo_training.pt"
TABPFN_FILE = "pretrained/tabpfn-v2.5-classifier-v2.5_default.ckpt"
#: Features above this width are average-pooled down to it (V0's ``target_dim``); 168 x 6 = 1008 stays as is.
MAX_FEATURES = 1024


class InContextClassifier(Protocol):
    """What V0 needs of its head: scikit-learn's ``fit`` / ``predict_proba`` (TabPFN's interface)."""

    def fit(self, X, y) -> Any: ...

    def predict_proba(self, X) -> Any: ...


def last_token_pool(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Hidden state of each sequence's last real token, ``[B, H]``, for left or right padding."""
    if bool((attention_mask[:, -1] == 1).all()):  # left padding: the last position is real everywhere
        return hidden_states[:, -1]
    last = attention_mask.sum(dim=1) - 1
    return hidden_states[torch.arange(hidden_states.shape[0], device=hidden_states.device), last]


class DynamicQueryAdapter(nn.Module):
    """Queries = static queries + a delta generated from the pooled state; multi-head attention over token states.

    Input ``[B, T, H]`` token states and ``[B, T]`` mask; output ``[B, num_queries * embed_dim]``.
    """

    def __init__(
        self, input_dim: int, num_queries: int = 168, embed_dim: int = 6, num_heads: int = 3, bottleneck_dim: int = 128
    ) -> None:
        super().__init__()
        self.num_queries, self.embed_dim = num_queries, embed_dim
        self.static_queries = nn.Parameter(torch.zeros(1, num_queries, embed_dim))
        self.generator = nn.Sequential(
            nn.Linear(input_dim, bottleneck_dim),
            nn.LayerNorm(bottleneck_dim),
            nn.GELU(),
            nn.Dropout(0.0),  # kept so that indices match the checkpoint (generator.0, .1, .4)
            nn.Linear(bottleneck_dim, num_queries * embed_dim),
        )
        self.proj_kv = nn.Linear(input_dim, embed_dim)
        self.mha = nn.MultiheadAttention(embed_dim=embed_dim, num_heads=num_heads, batch_first=True)
        self.ln_q = nn.LayerNorm(embed_dim)
        self.ln_kv = nn.LayerNorm(embed_dim)

    def forward(self, hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        batch = hidden_states.shape[0]
        delta = self.generator(last_token_pool(hidden_states, attention_mask))
        queries = self.static_queries.expand(batch, -1, -1) + delta.view(batch, self.num_queries, self.embed_dim)
        kv = self.proj_kv(hidden_states)
        out, _ = self.mha(
            query=self.ln_q(queries), key=self.ln_kv(kv), value=kv, key_padding_mask=~attention_mask.bool()
        )
        return out.reshape(batch, -1)


class V0Embedder(nn.Module):
    """Backbone plus adapter: prompt token ids -> V0 features. Attribute names match the checkpoint's keys."""

    def __init__(self, backbone: nn.Module, adapter_layer: DynamicQueryAdapter) -> None:
        super().__init__()
        self.backbone = backbone
        self.adapter_layer = adapter_layer

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        features = self.adapter_layer(hidden.to(self.adapter_layer.proj_kv.weight.dtype), attention_mask)
        if features.shape[1] > MAX_FEATURES:
            features = nn.functional.adaptive_avg_pool1d(features.unsqueeze(1), MAX_FEATURES).squeeze(1)
        return features


def load_v0_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """The adapter (and optional backbone) state dict of a V0 checkpoint, read without running any code.

    Accepts ``{"model_state_dict": {...}}`` (the published layout) or a bare state dict; drops a DDP ``module.``
    prefix. Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for keys outside
    ``adapter_layer.*`` / ``backbone.*``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"V0 checkpoint not found: {path}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # pickle.UnpicklingError for objects beyond tensors and containers
        raise RuntimeError(
            f"{path} holds objects other than tensors, so it cannot be loaded safely (weights_only=True): {err}. "
            "If you trust the file, allow exactly the types named above with torch.serialization.add_safe_globals."
        ) from err
    state = checkpoint.get("model_state_dict", checkpoint) if isinstance(checkpoint, Mapping) else None
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path} is not a V0 checkpoint: expected a state dict under 'model_state_dict'")
    state = {k.removeprefix("module."): v for k, v in state.items()}
    unexpected = sorted(k for k in state if not k.startswith(("adapter_layer.", "backbone.")))
    if unexpected:
        raise ValueError(f"unexpected keys in V0 checkpoint {path}: {unexpected[:5]}")
    return state


def _adapter_from_state(state: Mapping[str, torch.Tensor], input_dim: int, num_heads: int) -> DynamicQueryAdapter:
    """Build the adapter with the sizes the checkpoint implies, and load it strictly."""
    prefix = "adapter_layer."
    adapter_state = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
    for needed in ("static_queries", "generator.0.weight"):
        if needed not in adapter_state:
            raise ValueError(f"V0 checkpoint lacks {prefix}{needed}; is this a dynamic-query V0 checkpoint?")
    _, num_queries, embed_dim = adapter_state["static_queries"].shape
    bottleneck_dim, checkpoint_input_dim = adapter_state["generator.0.weight"].shape
    if checkpoint_input_dim != input_dim:
        raise ValueError(
            f"V0 adapter expects backbone hidden size {checkpoint_input_dim}, the backbone has {input_dim}: "
            "use the backbone the checkpoint was trained with (Qwen/Qwen3-Embedding-0.6B)"
        )
    adapter = DynamicQueryAdapter(input_dim, num_queries, embed_dim, num_heads, bottleneck_dim)
    result = adapter.load_state_dict(adapter_state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"V0 adapter state does not match: missing {[prefix + k for k in result.missing_keys]}, "
            f"unexpected {[prefix + k for k in result.unexpected_keys]}"
        )
    return adapter


def _resolve(repo_or_folder: str, filename: str, revision: str | None) -> Path:
    """A file from a local folder, or from the Hub through ``huggingface_hub`` (honours HF_HOME, offline mode)."""
    folder = Path(repo_or_folder)
    if folder.is_dir():
        path = folder / filename
        if not path.is_file():
            raise FileNotFoundError(f"{filename} not found in {folder}")
        return path
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_or_folder, filename, revision=revision))
    except Exception as err:
        raise FileNotFoundError(
            f"could not get {filename} from the Hub repo {repo_or_folder!r} ({type(err).__name__}: {err}); "
            "download it where the Hub is reachable and pass the local folder instead"
        ) from err


def _tabpfn_head(model_path: Path, device: str, n_estimators: int) -> InContextClassifier:
    try:
        from tabpfn import TabPFNClassifier
    except ImportError as err:
        raise ImportError("V0Prior's TabPFN head needs the v0 extra: pip install 'v05-trl[v0]'") from err
    import inspect

    options = {
        "model_path": str(model_path),
        "device": device,
        "n_estimators": n_estimators,
        "inference_precision": torch.float32,
        # V0 averages the estimators' temperature-scaled logits before the softmax.
        "average_before_softmax": True,
    }
    if "auto_scale_n_estimators" in inspect.signature(TabPFNClassifier).parameters:
        options["auto_scale_n_estimators"] = False  # keep exactly n_estimators, as V0 was evaluated
    return TabPFNClassifier(**options)


class V0Prior(InContextPrior):
    """The generalist value model V0 as a prior (``"v0"`` or ``"v0:<hub id or folder>"``).

    Context: the policy's most recent ``context_size`` results (a :class:`ContextBuffer`); until it holds
    ``min_context`` of them, or while all of them fall on one side of 0.5, the prior has no opinion (NaN).
    Prompt features are cached by text. Build it with :meth:`from_pretrained`.
    """

    name = "v0"

    def __init__(
        self,
        embedder: V0Embedder,
        tokenizer,
        head: InContextClassifier,
        *,
        context_size: int = 256,
        min_context: int = 64,
        batch_size: int = 32,
        max_length: int = 2048,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(context_size, min_context)
        self.device = torch.device(device)
        self.embedder = embedder.to(self.device).eval()
        self.tokenizer = tokenizer
        self.tokenizer.padding_side = "left"
        self.head = head
        self.batch_size, self.max_length = batch_size, max_length
        self._features: dict[str, torch.Tensor] = {}
        self._fitted_on: tuple | None = None

    @classmethod
    def from_pretrained(
        cls,
        model_id_or_path: str = DEFAULT_V0_REPO,
        *,
        backbone: str = DEFAULT_V0_BACKBONE,
        head: InContextClassifier | None = None,
        device: str | torch.device | None = None,
        revision: str | None = None,
        trust_remote_code: bool = False,
        num_heads: int = 3,
        n_estimators: int = 4,
        checkpoint_file: str = CHECKPOINT_FILE,
        tabpfn_file: str = TABPFN_FILE,
        **kwargs,
    ) -> V0Prior:
        """Load V0 from a Hub id or a local folder holding ``checkpoint_file`` (and ``tabpfn_file``).

        ``backbone`` is the embedding model (Hub id or folder). ``head`` replaces the TabPFN head by any object
        with ``fit``/``predict_proba``; without it the TabPFN v2.5 checkpoint is loaded (``v05-trl[v0]``).
        Other keyword arguments go to :class:`V0Prior` (``context_size``, ``min_context``, ``batch_size``, ...).
        """
        from transformers import AutoModel, AutoTokenizer

        device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        state = load_v0_checkpoint(_resolve(model_id_or_path, checkpoint_file, revision))
        if head is None:
            head = _tabpfn_head(_resolve(model_id_or_path, tabpfn_file, revision), str(device), n_estimators)
        tokenizer = AutoTokenizer.from_pretrained(backbone, trust_remote_code=trust_remote_code)  # padded left below
        backbone_model = AutoModel.from_pretrained(backbone, trust_remote_code=trust_remote_code)
        adapter = _adapter_from_state(state, backbone_model.config.hidden_size, num_heads)
        backbone_state = {k.removeprefix("backbone."): v for k, v in state.items() if k.startswith("backbone.")}
        if backbone_state:  # a checkpoint whose backbone was fine-tuned with the adapter
            result = backbone_model.load_state_dict(backbone_state, strict=False)
            if result.unexpected_keys:
                raise ValueError(f"unexpected backbone keys in V0 checkpoint: {result.unexpected_keys[:5]}")
        return cls(V0Embedder(backbone_model, adapter), tokenizer, head, device=device, **kwargs)

    @torch.inference_mode()
    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """V0 features ``[N, F]`` (CPU, float32), computed in batches once per distinct text."""
        new = list(dict.fromkeys(t for t in texts if t not in self._features))
        for start in range(0, len(new), self.batch_size):
            chunk = new[start : start + self.batch_size]
            batch = self.tokenizer(
                chunk, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
            ).to(self.device)
            features = self.embedder(batch["input_ids"], batch["attention_mask"]).float().cpu()
            self._features.update(zip(chunk, features, strict=True))
        return torch.stack([self._features[t] for t in texts])

    def _fit_head(self) -> bool:
        """Fit the head on the current context (only when it changed); False if it has one class only."""
        labels = [int(r >= 0.5) for r in self.context.pass_rates]
        key = (tuple(self.context.texts), tuple(labels))
        if key == self._fitted_on:
            return True
        if len(set(labels)) < 2:
            return False
        self.head.fit(self.embed(self.context.texts).numpy(), torch.tensor(labels).numpy())
        self._fitted_on = key
        return True

    def _predict(self, texts, **columns):
        if not self.has_context or not self._fit_head():
            return torch.full((len(texts),), float("nan"))
        probs = torch.as_tensor(self.head.predict_proba(self.embed(texts).numpy()), dtype=torch.float32)
        classes = list(getattr(self.head, "classes_", [0, 1]))
        return probs[:, classes.index(1)]

    def __repr__(self) -> str:
        return f"V0Prior(context={len(self.context)}/{self.context.entries.maxlen}, device={self.device})"
