"""Small builders shared by the trainer tests and the two-process script (tiny model, plain datasets, rewards)."""

from __future__ import annotations

from datasets import Dataset

from v05_trl.rewards import completion_text

PROMPTS = [f"What is {i} plus {i + 1}?" for i in range(32)]


def plain_dataset(n: int = 32) -> Dataset:
    return Dataset.from_dict({"prompt": PROMPTS[:n]})


def conversational_dataset(n: int = 32) -> Dataset:
    return Dataset.from_dict({"prompt": [[{"role": "user", "content": p}] for p in PROMPTS[:n]]})


def constant_reward(value: float | None):
    def reward(completions, **kwargs):
        return [value] * len(completions)

    reward.__name__ = f"constant_{value}"
    return reward


def parity_reward(completions, **kwargs):
    """1 for completions of odd length in characters, else 0: a noisy 0/1 reward for a random policy."""
    return [float(len(completion_text(c)) % 2) for c in completions]


def generation_batch(prompts, k: int) -> list[dict]:
    """Rows as TRL's RepeatSampler yields them: each prompt ``k`` times in a row."""
    return [{"prompt": p} for p in prompts for _ in range(k)]


def base_config(output_dir=None, **overrides):
    from v05_trl import V05GRPOConfig

    settings = dict(
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=8,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-3,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        seed=0,
        value_prior="none",
        loss_type="grpo",
        shuffle_dataset=False,
    )
    settings.update(overrides)
    if output_dir is not None:
        settings["output_dir"] = str(output_dir)
    return V05GRPOConfig(**settings)
