"""A stand-in for ``vllm.LLM`` (colocate mode) that runs on CPU and records every call.

It has the interface TRL's ``VLLMGeneration`` uses: ``generate(prompts, sampling_params, use_tqdm)`` returning
``RequestOutput``-like objects, ``reset_prefix_cache()``, and
``llm_engine.model_executor.driver_worker.model_runner.model.load_weights`` for weight sync.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch


class FakeSamplingParams:
    """Keeps the keyword arguments ``vllm.SamplingParams`` would take."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


class FakeLLM:
    def __init__(self, eos_token_id: int, vocab_size: int, seed: int = 0):
        self.eos_token_id = eos_token_id
        self.vocab_size = vocab_size
        self.generator = torch.Generator().manual_seed(seed)
        self.generate_calls: list[int] = []  # prompts per generate() call
        self.weight_loads = 0  # load_weights calls (one per parameter per sync)
        self.syncs = 0  # reset_prefix_cache calls, one per weight sync
        model = SimpleNamespace(load_weights=self._load_weights)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=SimpleNamespace(model=model)))
        )

    def _load_weights(self, weights):
        self.weight_loads += len(weights)

    def reset_prefix_cache(self):
        self.syncs += 1

    def generate(self, prompts, sampling_params, use_tqdm=False):
        assert sampling_params.n == 1, "colocate mode generates one completion per (repeated) prompt"
        self.generate_calls.append(len(prompts))
        outputs = []
        for prompt in prompts:
            length = int(torch.randint(1, sampling_params.max_tokens + 1, (1,), generator=self.generator))
            tokens = torch.randint(0, self.vocab_size, (length,), generator=self.generator).tolist()
            if length < sampling_params.max_tokens:
                tokens[-1] = self.eos_token_id
            logprobs = [{t: SimpleNamespace(logprob=-2.0, rank=1)} for t in tokens]
            completion = SimpleNamespace(token_ids=tokens, logprobs=logprobs)
            outputs.append(SimpleNamespace(prompt_token_ids=prompt["prompt_token_ids"], outputs=[completion]))
        return outputs


def install(monkeypatch, eos_token_id: int, vocab_size: int) -> list[FakeLLM]:
    """Make TRL's colocate-mode ``VLLMGeneration`` build a :class:`FakeLLM`; returns the list the engines land in."""
    import trl.generation.vllm_generation as vllm_generation

    engines: list[FakeLLM] = []

    def init_vllm(self):
        self.llm = FakeLLM(eos_token_id, vocab_size)
        self._llm_weights_sleeping = False
        engines.append(self.llm)

    monkeypatch.setattr(vllm_generation.VLLMGeneration, "_init_vllm", init_vllm)
    monkeypatch.setattr(vllm_generation, "SamplingParams", FakeSamplingParams, raising=False)
    return engines
