"""avg@k and pass@k of a checkpoint on the paper's six math benchmarks (or any math dataset), graded by math-verify.

    python scripts/evaluate.py --model outputs/Qwen3-0.6B-V05-GSM8K

Per problem, ``k`` completions are sampled (defaults: temperature 0.6, top-p 0.95, k = 16 for AIME24, AIME25 and
AMC23, 4 for the rest) and graded with the reward the recipes train on (:func:`v05_trl.rewards.math_answer_reward`:
last ``\\boxed{}``, math-verify). avg@k is the mean share of correct completions, pass@k the share of problems with at
least one. Generation uses vLLM when it is installed and a GPU is present, ``transformers`` otherwise.

Writes a JSON file (default: ``eval_results.json`` in the model folder, where the model card finds it) and a Markdown
table beside it, and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tqdm import tqdm  # noqa: E402

from v05_trl.math_data import EVAL_BENCHMARKS, load_math_dataset  # noqa: E402
from v05_trl.model_card import EVAL_RESULTS_FILE, evaluation_table  # noqa: E402
from v05_trl.rewards import math_answer_reward  # noqa: E402

#: Benchmarks small enough that the paper samples 16 completions per problem.
SMALL_BENCHMARKS = ("aime24", "aime25", "amc23")


def default_k(benchmark: str) -> int:
    return 16 if benchmark in SMALL_BENCHMARKS else 4


def score(rewards: list[list[float | None]]) -> dict:
    """avg@k and pass@k from per-problem lists of k grades; problems whose gold answer does not parse are skipped."""
    graded = [row for row in rewards if all(r is not None for r in row)]
    if not graded:
        raise ValueError("no gradable problem (every gold answer failed to parse)")
    return {
        "problems": len(graded),
        "ungradable": len(rewards) - len(graded),
        "k": len(graded[0]),
        "avg@k": sum(sum(row) / len(row) for row in graded) / len(graded),
        "pass@k": sum(any(r == 1.0 for r in row) for row in graded) / len(graded),
    }


class TransformersSampler:
    def __init__(self, model: str, batch_size: int):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.bfloat16 if device == "cuda" else torch.float32
        self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(device).eval()
        self.batch_size = batch_size

    def sample(self, prompts: list[str], k: int, options) -> list[list[str]]:
        import torch

        outputs = []
        for start in tqdm(range(0, len(prompts), self.batch_size), desc="  batches", leave=False):
            batch = self.tokenizer(prompts[start : start + self.batch_size], return_tensors="pt", padding=True)
            batch = batch.to(self.model.device)
            with torch.no_grad():
                generated = self.model.generate(
                    **batch,
                    do_sample=True,
                    temperature=options.temperature,
                    top_p=options.top_p,
                    max_new_tokens=options.max_new_tokens,
                    num_return_sequences=k,
                    pad_token_id=self.tokenizer.pad_token_id,
                )
            texts = self.tokenizer.batch_decode(generated[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
            outputs += [texts[i : i + k] for i in range(0, len(texts), k)]
        return outputs


class VLLMSampler:
    def __init__(self, model: str, batch_size: int):
        from vllm import LLM

        self.llm = LLM(model=model)

    def sample(self, prompts: list[str], k: int, options) -> list[list[str]]:
        from vllm import SamplingParams

        params = SamplingParams(
            n=k, temperature=options.temperature, top_p=options.top_p, max_tokens=options.max_new_tokens
        )
        results = self.llm.generate(prompts, params)
        return [[out.text for out in result.outputs] for result in results]


def make_sampler(options):
    import importlib.util

    import torch

    backend = options.backend
    if backend == "auto":
        backend = "vllm" if importlib.util.find_spec("vllm") and torch.cuda.is_available() else "transformers"
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            raise ImportError("--backend vllm needs vLLM: pip install 'v05-trl[vllm]'")
        return backend, VLLMSampler(options.model, options.batch_size)
    return backend, TransformersSampler(options.model, options.batch_size)


def render_prompts(tokenizer, prompts) -> list[str]:
    if isinstance(prompts[0], str):
        return list(prompts)
    return [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="checkpoint folder or Hub id")
    parser.add_argument("--benchmarks", nargs="+", default=list(EVAL_BENCHMARKS), help="shipped names or dataset ids")
    parser.add_argument("--k", type=int, default=None, help="completions per problem (default: 16 AIME/AMC, 4 else)")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--max-new-tokens", type=int, default=4096)
    parser.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    parser.add_argument("--split", default="test", help="split of Hub datasets")
    parser.add_argument("--problem-column", default="problem")
    parser.add_argument("--answer-column", default="answer")
    parser.add_argument("--no-chat", action="store_true", help="plain prompts instead of the chat template")
    parser.add_argument("--backend", choices=["auto", "vllm", "transformers"], default="auto")
    parser.add_argument("--batch-size", type=int, default=8, help="problems per transformers generate call")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help=f"JSON path (default: MODEL/{EVAL_RESULTS_FILE} for a folder)")
    options = parser.parse_args(argv)

    import torch

    torch.manual_seed(options.seed)
    backend, sampler = make_sampler(options)
    tokenizer = sampler.tokenizer if backend == "transformers" else sampler.llm.get_tokenizer()

    benchmarks = {}
    for name in tqdm(options.benchmarks, desc="benchmarks"):
        dataset = load_math_dataset(
            name,
            split=options.split,
            problem_column=options.problem_column,
            answer_column=options.answer_column,
            chat=not options.no_chat,
            limit=options.limit,
        )
        k = options.k or default_k(name)
        completions = sampler.sample(render_prompts(tokenizer, dataset["prompt"]), k, options)
        answers = dataset["answer"]
        grades = [math_answer_reward(texts, [gold] * k) for texts, gold in zip(completions, answers, strict=True)]
        benchmarks[name] = score(grades)

    results = {
        "model": options.model,
        "backend": backend,
        "settings": {
            "temperature": options.temperature,
            "top_p": options.top_p,
            "max_new_tokens": options.max_new_tokens,
        },
        "benchmarks": benchmarks,
    }
    out = Path(options.out) if options.out else None
    if out is None:
        out = Path(options.model) / EVAL_RESULTS_FILE if os.path.isdir(options.model) else Path("results/eval.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    table = evaluation_table(results)
    out.with_suffix(".md").write_text(table + "\n")
    print(table)
    print(f"\nWrote {out} and {out.with_suffix('.md')}")
    return results


if __name__ == "__main__":
    main()
