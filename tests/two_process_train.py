"""Run by test_two_processes.py under `accelerate launch --multi_gpu --num_processes 2` (gloo on CPU).

Prompts alternate "A" (reward 1) and "B" (reward 0) and are not shuffled, so process 0 holds an "A" prompt, whose
prior of 0 is rejected (it draws up to k_max), while process 1 holds a "B" prompt, whose prior is accepted.
Writes one JSON per process to the folder given as first argument.
"""

import json
import sys
from pathlib import Path

import torch
from datasets import Dataset
from trainer_helpers import base_config

from v05_trl import V05GRPOTrainer


def reward(prompts, completions, log_extra, **kwargs):
    log_extra("first_letter", [prompt[0] for prompt in prompts])
    return [1.0 if prompt.startswith("A") else 0.0 for prompt in prompts]


def main(out_dir: str, model_path: str) -> None:
    dataset = Dataset.from_dict({"prompt": [f"{'AB'[i % 2]}: what is {i} plus {i}?" for i in range(16)]})
    args = base_config(
        Path(out_dir) / "run",
        per_device_train_batch_size=4,
        value_prior="constant:0.0",
        max_steps=2,
        log_completions=True,
    )
    trainer = V05GRPOTrainer(model=model_path, reward_funcs=reward, args=args, train_dataset=dataset)
    rows = []
    original = trainer._generate_and_score_completions

    def recording(inputs):
        output = original(inputs)
        rows.append(
            {
                "prompt": inputs[0]["prompt"],
                "rows": output["completion_ids"].shape[0],
                "real_rows": int((output["completion_mask"].sum(dim=1) > 0).sum()),
                "num_items_in_batch": int(output["num_items_in_batch"]),
            }
        )
        return output

    trainer._generate_and_score_completions = recording
    trainer.train()
    rank = trainer.accelerator.process_index
    checksum = sum(float(p.detach().double().sum()) for p in trainer.model.parameters())
    result = {"rank": rank, "batches": rows, "checksum": checksum, "log_history": trainer.state.log_history}
    Path(out_dir, f"rank{rank}.json").write_text(json.dumps(result))
    assert torch.distributed.get_world_size() == 2


if __name__ == "__main__":
    main(*sys.argv[1:3])
