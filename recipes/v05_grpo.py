# Copyright The v05-trl Authors. Licensed under the Apache License, Version 2.0.
"""V0.5 (and, with other flags, GRPO / DAPO) on math problems with a math-verify reward, in TRL's script style.

    accelerate launch --config_file recipes/accelerate/multi_gpu.yaml recipes/v05_grpo.py \
        --config recipes/configs/v05_qwen3_4b_dapo_math.yaml

YAML gives the defaults and command-line flags override them. One code path runs every method, so that comparisons
are fair:

- V0.5: the defaults (``num_generations 4``, ``max_num_generations 16``, a value prior);
- GRPO with G = 16: ``--value_prior none --num_generations 16 --max_num_generations 16``;
- DAPO: as GRPO, with ``--loss_type dapo --epsilon_high 0.28 --overlong_buffer_length 4096`` (TRL's soft overlong
  punishment; the total reward then lies in [-1, 1], declare it with ``--reward_range -1 1``).

The dataset is a shipped benchmark name (``gsm8k_train``, ``math500``, ...), a local JSONL/Parquet file, or a Hub
dataset id; ``--problem_column``/``--answer_column`` name its columns (dotted paths reach into nested ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trl import ModelConfig, ScriptArguments, TrlParser, get_peft_config, get_quantization_config

from v05_trl import V05GRPOConfig, V05GRPOTrainer
from v05_trl.math_data import load_math_dataset
from v05_trl.rewards import MATH_SYSTEM_PROMPT, math_answer_reward


@dataclass
class MathScriptArguments(ScriptArguments):
    """TRL's ``ScriptArguments`` plus the columns and prompt format of a math dataset."""

    dataset_name: str | None = field(
        default="gsm8k_train",
        metadata={"help": "Shipped dataset name, local .jsonl/.json/.parquet file, or Hub dataset id."},
    )
    problem_column: str = field(default="problem", metadata={"help": "Column holding the problem text."})
    answer_column: str = field(default="answer", metadata={"help": "Column holding the gold final answer."})
    chat_prompts: bool = field(
        default=True, metadata={"help": "Conversational prompts (system + user); False: plain text prompts."}
    )
    system_prompt: str = field(default=MATH_SYSTEM_PROMPT, metadata={"help": "Instruction added to every prompt."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep only the first N problems."})
    overlong_buffer_length: int = field(
        default=0,
        metadata={
            "help": "DAPO's soft overlong punishment over the last N tokens of max_completion_length (0: off). "
            "Its reward lies in [-1, 0]: set reward_range to cover the total."
        },
    )


def build_reward_funcs(script_args: MathScriptArguments, training_args: V05GRPOConfig) -> list:
    reward_funcs = [math_answer_reward]
    if script_args.overlong_buffer_length:
        from trl.rewards import get_soft_overlong_punishment

        lo, hi = training_args.reward_range
        if lo > -1.0:
            raise ValueError(
                "overlong_buffer_length adds a reward in [-1, 0]; set --reward_range -1 1 (reward_range must hold "
                "the total reward)."
            )
        reward_funcs.append(
            get_soft_overlong_punishment(
                max_completion_len=training_args.max_completion_length,
                soft_punish_cache=script_args.overlong_buffer_length,
            )
        )
    return reward_funcs


def main(script_args: MathScriptArguments, training_args: V05GRPOConfig, model_args: ModelConfig):
    model_init_kwargs = dict(
        revision=model_args.model_revision,
        trust_remote_code=training_args.trust_remote_code,
        attn_implementation=model_args.attn_implementation,
        dtype=model_args.dtype,
    )
    quantization_config = get_quantization_config(model_args)
    training_args.model_init_kwargs = {**model_init_kwargs, **(training_args.model_init_kwargs or {})}

    dataset = load_math_dataset(
        script_args.dataset_name,
        split=script_args.dataset_train_split,
        config_name=script_args.dataset_config,
        problem_column=script_args.problem_column,
        answer_column=script_args.answer_column,
        chat=script_args.chat_prompts,
        system_prompt=script_args.system_prompt,
        limit=script_args.max_train_samples,
    )
    trainer = V05GRPOTrainer(
        model=model_args.model_name_or_path,
        reward_funcs=build_reward_funcs(script_args, training_args),
        args=training_args,
        train_dataset=dataset,
        peft_config=get_peft_config(model_args),
        **({"quantization_config": quantization_config} if quantization_config is not None else {}),
    )
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    trainer.create_model_card(dataset_name=script_args.dataset_name)
    trainer.accelerator.print(f"Model and model card saved to {training_args.output_dir}")
    if training_args.push_to_hub:
        trainer.push_to_hub(dataset_name=script_args.dataset_name)
        trainer.accelerator.print(f"Pushed to https://huggingface.co/{trainer.hub_model_id}")
    # Only the main process writes the card: let the others wait for it before the process group goes, or the
    # teardown of a gloo group can hang (seen about 1 run in 4 with two CPU processes).
    trainer.accelerator.wait_for_everyone()
    trainer.end()


if __name__ == "__main__":
    parser = TrlParser((MathScriptArguments, V05GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
