"""Push a saved V0.5 checkpoint folder to the Hugging Face Hub with its model card (and evaluation, if present).

    python scripts/push_to_hub.py outputs/Qwen3-0.6B-V05-GSM8K --repo-id you/Qwen3-0.6B-V05-GSM8K

The folder is what ``recipes/v05_grpo.py`` (or ``trainer.save_model`` + ``trainer.create_model_card``) wrote:
weights, tokenizer, config and ``README.md``. When ``eval_results.json`` from ``scripts/evaluate.py`` is there (or
given with ``--eval``), its table replaces the card's evaluation section before the upload. Intermediate
``checkpoint-*`` folders and optimizer state are not uploaded. ``HF_ENDPOINT`` and ``HF_TOKEN`` are honoured.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from v05_trl.model_card import EVAL_RESULTS_FILE, evaluation_table, replace_evaluation  # noqa: E402

WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "adapter_model.safetensors", "pytorch_model.bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json")
IGNORED = ["checkpoint-*", "checkpoint-*/**", "optimizer.pt", "scheduler.pt", "rng_state*.pth", "*.pt"]


def check_folder(folder: Path) -> None:
    """Fail with the missing piece named unless ``folder`` holds weights, a tokenizer, a config and a card."""
    missing = []
    if not any((folder / name).exists() for name in WEIGHT_FILES):
        missing.append(f"weights (one of {', '.join(WEIGHT_FILES)})")
    if not any((folder / name).exists() for name in TOKENIZER_FILES):
        missing.append(f"tokenizer (one of {', '.join(TOKENIZER_FILES)})")
    if not ((folder / "config.json").exists() or (folder / "adapter_config.json").exists()):
        missing.append("config.json")
    if not (folder / "README.md").exists():
        missing.append("README.md (the model card: trainer.create_model_card() writes it)")
    if missing:
        raise FileNotFoundError(f"{folder} is not a complete checkpoint; missing: {'; '.join(missing)}")


def update_card(folder: Path, eval_path: Path | None) -> bool:
    """Put the evaluation table into the folder's card; returns whether there was one."""
    eval_path = eval_path or folder / EVAL_RESULTS_FILE
    if not eval_path.exists():
        return False
    card = folder / "README.md"
    table = evaluation_table(json.loads(eval_path.read_text()))
    card.write_text(replace_evaluation(card.read_text(), table))
    return True


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="saved checkpoint folder")
    parser.add_argument("--repo-id", required=True, help="namespace/name on the Hub")
    parser.add_argument(
        "--eval", type=Path, default=None, help=f"evaluation JSON (default: FOLDER/{EVAL_RESULTS_FILE})"
    )
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--revision", default=None, help="branch to push to (default: main)")
    parser.add_argument("--commit-message", default="Upload V0.5-trained model")
    options = parser.parse_args(argv)

    from huggingface_hub import HfApi

    check_folder(options.folder)
    with_eval = update_card(options.folder, options.eval)
    api = HfApi()
    url = api.create_repo(options.repo_id, private=options.private, exist_ok=True, repo_type="model")
    api.upload_folder(
        folder_path=str(options.folder),
        repo_id=options.repo_id,
        repo_type="model",
        revision=options.revision,
        commit_message=options.commit_message,
        ignore_patterns=IGNORED,
    )
    print(f"Pushed {options.folder} to {url}" + (" with its evaluation" if with_eval else ""))
    return str(url)


if __name__ == "__main__":
    main()
