"""A tiny causal LM and tokenizer built offline, for tests, the CPU demo and the CPU smoke recipe.

Nothing is downloaded: a byte-level BPE tokenizer is trained on the spot with `tokenizers` on a small built-in corpus
(digits, arithmetic, chat markup), given a ChatML chat template, and paired with a randomly initialised 2-layer
Qwen3 model. Both are saved with ``save_pretrained`` and load back with ``from_pretrained`` like any Hub checkpoint.
"""

from __future__ import annotations

import operator
import random
from pathlib import Path

__all__ = ["CHATML_TEMPLATE", "build_tiny_model", "build_tiny_tokenizer"]

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_WORDS = (
    "what is the answer to plus minus times sum of and put your final in boxed solve compute "
    "system user assistant think step by step so the number"
)


def _corpus(seed: int = 0, size: int = 2000) -> list[str]:
    rng = random.Random(seed)
    words = [*_WORDS.split(), "=", "+", "-", "*", "(", ")", "{", "}", "\\boxed"]
    operations = {"+": operator.add, "-": operator.sub, "*": operator.mul}
    lines = []
    for _ in range(size):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        op = rng.choice("+-*")
        lines.append(f"What is {a} {op} {b}? The answer is \\boxed{{{operations[op](a, b)}}}.")
        lines.append(" ".join(rng.choice(words) for _ in range(12)))
    return lines


def build_tiny_tokenizer(vocab_size: int = 512):
    """A byte-level BPE ``PreTrainedTokenizerFast`` with ChatML markup, trained offline in well under a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        chat_template=CHATML_TEMPLATE,
        padding_side="left",
    )


def build_tiny_model(
    output_dir: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    vocab_size: int = 512,
    seed: int = 0,
) -> Path:
    """Save a randomly initialised 2-layer Qwen3 causal LM and its tokenizer to ``output_dir``; return the path."""
    import torch
    from transformers import AutoModelForCausalLM, Qwen3Config

    output_dir = Path(output_dir)
    tokenizer = build_tiny_tokenizer(vocab_size)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    return output_dir


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m v05_trl.tiny_model OUTPUT_DIR  (builds the tiny model and tokenizer offline)")
    print(build_tiny_model(sys.argv[1]))
