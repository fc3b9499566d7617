"""V0Prior offline: a tiny random Qwen3 backbone, random adapter weights saved in the published checkpoint's format,
and a scikit-learn classifier injected as the head (TabPFN's weights cannot be downloaded here)."""

import argparse
import os
from pathlib import Path

import pytest
import torch
from sklearn.linear_model import LogisticRegression

from v05_trl.priors import V0Prior, load_prior
from v05_trl.priors.v0 import CHECKPOINT_FILE, TABPFN_FILE, DynamicQueryAdapter, load_v0_checkpoint

HIDDEN = 64  # the tiny backbone's hidden size


def _save_checkpoint(folder: Path, state: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    torch.save({"model_state_dict": state}, folder / CHECKPOINT_FILE)
    return folder


def _adapter_state(seed=0, **sizes):
    torch.manual_seed(seed)
    adapter = DynamicQueryAdapter(HIDDEN, **sizes)
    for parameter in adapter.parameters():
        torch.nn.init.normal_(parameter, std=0.3)  # nonzero generator output too
    return {f"adapter_layer.{k}": v for k, v in adapter.state_dict().items()}


class CountingHead(LogisticRegression):
    fits = 0

    def fit(self, X, y):
        CountingHead.fits += 1
        assert X.shape[1] == 168 * 6  # the published feature width
        return super().fit(X, y)


@pytest.fixture
def v0_folder(tmp_path):
    return _save_checkpoint(tmp_path / "v0", _adapter_state())


def _prior(folder, backbone, **kwargs):
    return V0Prior.from_pretrained(str(folder), backbone=str(backbone), head=CountingHead(), device="cpu", **kwargs)


def test_checkpoint_keys_match_the_published_layout(v0_folder):
    keys = set(load_v0_checkpoint(v0_folder / CHECKPOINT_FILE))
    expected = {
        "adapter_layer.static_queries",
        "adapter_layer.generator.0.weight",
        "adapter_layer.generator.1.weight",
        "adapter_layer.generator.4.bias",
        "adapter_layer.proj_kv.weight",
        "adapter_layer.mha.in_proj_weight",
        "adapter_layer.mha.out_proj.weight",
        "adapter_layer.ln_q.weight",
        "adapter_layer.ln_kv.bias",
    }
    assert expected <= keys


def test_v0_prior_predicts_from_its_context_and_caches(v0_folder, tiny_model_path):
    prior = _prior(v0_folder, tiny_model_path, context_size=16, min_context=4)
    prompts = [f"What is {a} + {a}?" for a in range(8)]
    assert torch.isnan(prior.predict(prompts[:2])).all()  # empty context: no opinion
    prior.update(prompts[:2], [1.0, 1.0], [4, 4])
    prior.update(prompts[2:4], [1.0, 1.0], [4, 4])
    assert torch.isnan(prior.predict(prompts[:1])).all()  # one class only: no opinion
    prior.update(prompts[4:6], [0.0, 0.25], [4, 4])
    fits = CountingHead.fits
    probs = prior.predict(prompts)
    assert probs.shape == (8,) and not torch.isnan(probs).any() and ((probs >= 0) & (probs <= 1)).all()
    assert torch.equal(prior.predict(prompts), probs) and CountingHead.fits == fits + 1  # context unchanged: no refit
    assert len(prior._features) == 8  # each prompt embedded once
    features = prior.embed(prompts[:3])
    assert features.shape == (3, 1008)
    restored = _prior(v0_folder, tiny_model_path, context_size=16, min_context=4)
    restored.load_state_dict(prior.state_dict())
    assert torch.allclose(restored.predict(prompts), probs)


def test_batching_and_padding_do_not_change_features(v0_folder, tiny_model_path):
    prior = _prior(v0_folder, tiny_model_path, batch_size=2)
    prompts = ["What is 1 + 1?", "What is 123 + 456 + 789 + 1000?", "Hi"]
    together = prior.embed(prompts)
    alone = torch.stack([_prior(v0_folder, tiny_model_path).embed([p])[0] for p in prompts])
    assert torch.allclose(together, alone, atol=1e-5)


def test_missing_and_unexpected_keys_are_errors(tmp_path, tiny_model_path):
    state = _adapter_state()
    del state["adapter_layer.proj_kv.bias"]
    with pytest.raises(ValueError, match=r"missing \['adapter_layer.proj_kv.bias'\]"):
        _prior(_save_checkpoint(tmp_path / "missing", state), tiny_model_path)
    state = {**_adapter_state(), "adapter_layer.extra.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match=r"unexpected \['adapter_layer.extra.weight'\]"):
        _prior(_save_checkpoint(tmp_path / "extra", state), tiny_model_path)
    state = {**_adapter_state(), "value_head.weight": torch.zeros(1)}
    with pytest.raises(ValueError, match="unexpected keys in V0 checkpoint"):
        _prior(_save_checkpoint(tmp_path / "foreign", state), tiny_model_path)


def test_wrong_backbone_width_is_named(tmp_path, tiny_model_path):
    torch.manual_seed(0)
    adapter = DynamicQueryAdapter(HIDDEN * 2)
    state = {f"adapter_layer.{k}": v for k, v in adapter.state_dict().items()}
    with pytest.raises(ValueError, match="expects backbone hidden size 128, the backbone has 64"):
        _prior(_save_checkpoint(tmp_path / "wide", state), tiny_model_path)


def test_missing_file_and_unsafe_checkpoint(tmp_path, tiny_model_path):
    with pytest.raises(FileNotFoundError, match=f"{CHECKPOINT_FILE} not found"):
        _prior(tmp_path, tiny_model_path)
    folder = tmp_path / "unsafe"
    folder.mkdir()
    torch.save({"model_state_dict": _adapter_state(), "args": argparse.Namespace(lr=1e-4)}, folder / CHECKPOINT_FILE)
    with pytest.raises(RuntimeError, match="weights_only=True"):
        _prior(folder, tiny_model_path)


def test_hub_id_that_cannot_be_fetched_is_a_clear_error(tiny_model_path):
    with pytest.raises(FileNotFoundError, match="could not get v_0_for_grpo_training.pt from the Hub repo"):
        _prior("Now-Join-Us/Generalist-Value-Model-V0", tiny_model_path)


def test_missing_tabpfn_names_the_extra(v0_folder, tiny_model_path):
    try:
        import tabpfn  # noqa: F401

        pytest.skip("tabpfn is installed")
    except ImportError:
        pass
    (v0_folder / TABPFN_FILE).parent.mkdir(parents=True)
    (v0_folder / TABPFN_FILE).write_bytes(b"")
    with pytest.raises(ImportError, match=r"pip install 'v05-trl\[v0\]'"):
        V0Prior.from_pretrained(str(v0_folder), backbone=str(tiny_model_path), device="cpu")


REAL_V0 = os.environ.get("V05_V0_WEIGHTS")


@pytest.mark.skipif(
    not (REAL_V0 and Path(REAL_V0, CHECKPOINT_FILE).is_file()),
    reason="real V0 weights absent: set V05_V0_WEIGHTS to a folder holding the files of "
    "Now-Join-Us/Generalist-Value-Model-V0 (and have Qwen/Qwen3-Embedding-0.6B and tabpfn available)",
)
def test_real_v0_weights_load_and_predict():
    prior = load_prior(f"v0:{REAL_V0}", min_context=4, context_size=8)
    prior.update(["What is 1 + 1?", "What is 2 + 2?"], [1.0, 1.0], [4, 4])
    prior.update(["Prove Fermat's last theorem.", "Solve the Navier-Stokes problem."], [0.0, 0.0], [4, 4])
    probs = prior.predict(["What is 3 + 3?", "Prove the Riemann hypothesis."])
    assert ((probs >= 0) & (probs <= 1)).all()
