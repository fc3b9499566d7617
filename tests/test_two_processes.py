"""Two processes (gloo on CPU): one draws more extra rollouts than the other; padding keeps them in step."""

import json
import math
import os
from pathlib import Path

import pandas as pd
from conftest import accelerate_launch, two_cpu_processes

TESTS = Path(__file__).resolve().parent


def test_two_processes_with_unequal_extra_rollouts(tiny_model_path, tmp_path):
    pythonpath = os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])
    accelerate_launch(two_cpu_processes(), TESTS / "two_process_train.py", tmp_path, tiny_model_path,
                      env={"PYTHONPATH": pythonpath})  # fmt: skip
    rank0, rank1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))

    # Process 0 holds the rejected "A" prompts, process 1 the accepted "B" ones.
    assert all(b["prompt"].startswith("A") for b in rank0["batches"])
    assert all(b["prompt"].startswith("B") for b in rank1["batches"])
    for b0, b1 in zip(rank0["batches"], rank1["batches"], strict=True):
        assert b0["rows"] == b1["rows"] == 16  # equal row counts: process 1 is padded
        assert b0["real_rows"] == 16 and b1["real_rows"] == 4
        assert b0["num_items_in_batch"] == b1["num_items_in_batch"]  # gathered over both processes
    assert rank0["checksum"] == rank1["checksum"]  # DDP kept the replicas identical

    logs = [entry for entry in rank0["log_history"] if "loss" in entry]
    assert len(logs) == 2
    for entry in logs:
        assert math.isfinite(entry["loss"])
        assert entry["v05/completions"] == 20  # 16 + 4 real completions
        assert entry["v05/rollouts_per_prompt/max"] == 16 and entry["v05/rollouts_per_prompt/mean"] == 10
        assert entry["v05/padding_completions"] == 12  # process 1's share of the extra round
        assert entry["v05/prior_rejected_frac"] == 0.5
        assert entry["reward"] == 16 / 20  # over real completions only

    # The completions table keeps the 20 real rows of the last step, every column aligned (padding rows dropped).
    frame = pd.read_parquet(sorted((tmp_path / "run" / "completions").glob("*.parquet"))[-1])
    assert len(frame) == 20
    assert frame["first_letter"].tolist() == [prompt[0] for prompt in frame["prompt"]]
    assert frame["first_letter"].value_counts().to_dict() == {"A": 16, "B": 4}
