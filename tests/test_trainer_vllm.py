"""The vLLM colocate path: a fake engine with vllm.LLM's interface on CPU, the real engine where CUDA and vllm are."""

import importlib.util
import math

import fake_vllm
import pytest
import torch
from trainer_helpers import base_config, constant_reward, parity_reward, plain_dataset

from v05_trl import V05GRPOTrainer


def make_trainer(model_path, output_dir, reward=parity_reward, **overrides):
    args = base_config(
        output_dir,
        use_vllm=True,
        vllm_mode="colocate",
        value_prior="constant:0.0",
        max_steps=2,
        vllm_importance_sampling_mode="token_truncate",
        vllm_importance_sampling_clip_max=2.0,
        **overrides,
    )
    return V05GRPOTrainer(model=str(model_path), reward_funcs=reward, args=args, train_dataset=plain_dataset())


def test_fake_colocate_engine_syncs_once_per_step_and_serves_every_round(tiny_model_path, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    engines = fake_vllm.install(monkeypatch, tokenizer.eos_token_id, len(tokenizer))
    trainer = make_trainer(tiny_model_path, tmp_path)
    trainer.train()
    (engine,) = engines
    steps = trainer.state.global_step
    assert steps == 2
    # A prior of 0 is rejected wherever a prompt scores: each step makes a first call and one extra round.
    rounds = [entry["v05/rounds"] for entry in trainer.state.log_history if "v05/rounds" in entry]
    assert len(engine.generate_calls) == steps + sum(rounds)
    assert engine.generate_calls[0] == 8  # 2 prompts x k_init, one completion each (n=1)
    assert engine.syncs == steps  # weights pushed once per optimizer step, not again for the extra round
    assert engine.weight_loads == steps * len(list(trainer.model.parameters()))
    for entry in trainer.state.log_history:
        if "loss" in entry:
            assert math.isfinite(entry["loss"])
            assert entry["sampling/importance_sampling_ratio/max"] <= 2.0


def test_fake_engine_output_carries_importance_ratios_for_all_rows(tiny_model_path, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_path)
    fake_vllm.install(monkeypatch, tokenizer.eos_token_id, len(tokenizer))
    trainer = make_trainer(tiny_model_path, tmp_path, reward=constant_reward(1.0))
    trainer.model.train()
    output = trainer._generate_and_score_completions([{"prompt": "What is 1 plus 2?"}] * 4)
    rows, width = output["completion_ids"].shape
    assert rows > 4  # the extra round's rows are merged in
    for key in ("importance_sampling_ratio", "sampling_per_token_logps", "old_per_token_logps"):
        assert output[key].shape == (rows, width), key
    # Padded positions of the sampling log-probabilities are 0, real ones are the fake engine's -2.
    mask = output["completion_mask"].bool()
    assert torch.all(output["sampling_per_token_logps"][mask] == -2.0)


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available() or importlib.util.find_spec("vllm") is None, reason="needs CUDA and vllm"
)
def test_real_vllm_colocate_engine(tiny_model_path, tmp_path):
    trainer = make_trainer(
        tiny_model_path, tmp_path, use_cpu=False, vllm_gpu_memory_utilization=0.2, vllm_max_model_length=256
    )
    trainer.train()
    rounds = [entry["v05/rounds"] for entry in trainer.state.log_history if "v05/rounds" in entry]
    assert trainer.state.global_step == 2 and sum(rounds) >= 1
