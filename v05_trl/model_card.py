"""Model cards of V0.5-trained checkpoints: what was trained, with which V0.5 settings, at what rollout cost.

``V05GRPOTrainer.create_model_card`` renders ``templates/model_card.md`` (shipped with the package) with
``huggingface_hub.ModelCard``, so ``trainer.push_to_hub()`` uploads it; ``scripts/push_to_hub.py`` fills in the
evaluation table of ``scripts/evaluate.py`` between the card's evaluation markers.
"""

from __future__ import annotations

import json
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

__all__ = [
    "EVAL_RESULTS_FILE",
    "TEMPLATE",
    "evaluation_table",
    "render_model_card",
    "replace_evaluation",
    "training_usage",
]

TEMPLATE = Path(__file__).resolve().parent / "templates" / "model_card.md"
#: Written by scripts/evaluate.py into the checkpoint folder; read by the card.
EVAL_RESULTS_FILE = "eval_results.json"
_EVAL_SECTION = re.compile(r"(<!-- v05-eval-start -->\n).*?(\n<!-- v05-eval-end -->)", re.DOTALL)
V05_SETTINGS = (
    "value_prior",
    "num_generations",
    "max_num_generations",
    "rollout_cost",
    "noise_model",
    "osla_mode",
    "max_rollout_rounds",
    "reward_range",
    "loss_type",
    "beta",
)


def training_usage(log_history: list[dict], max_num_generations: int) -> dict:
    """Rollout figures of a run from its log history (entries carrying V0.5's metrics; ``logging_steps=1`` counts
    every step). Empty figures ("n/a") when nothing was logged."""
    steps = [entry for entry in log_history if "v05/completions" in entry]
    if not steps:
        return {"steps": 0, "completions": "n/a", "completions_at_k_max": "n/a", "rollouts_per_prompt": "n/a",
                "prior_rejected": "n/a", "prior_coverage": "n/a"}  # fmt: skip
    completions = sum(entry["v05/completions"] for entry in steps)
    prompts = sum(entry["v05/completions"] / entry["v05/rollouts_per_prompt/mean"] for entry in steps)
    rejected = [e["v05/prior_rejected_frac"] for e in steps if e.get("v05/prior_rejected_frac") is not None]
    return {
        "steps": len(steps),
        "completions": int(completions),
        "completions_at_k_max": int(round(prompts)) * max_num_generations,
        "rollouts_per_prompt": round(completions / prompts, 3),
        "prior_rejected": round(sum(rejected) / len(rejected), 3) if rejected else "n/a",
        "prior_coverage": round(sum(e["v05/prior_coverage"] for e in steps) / len(steps), 3),
    }


def evaluation_table(results: dict) -> str:
    """Markdown table of ``scripts/evaluate.py``'s results (``{"benchmarks": {name: {...}}, "settings": {...}}``)."""
    lines = ["| benchmark | problems | k | avg@k | pass@k |", "| --- | --- | --- | --- | --- |"]
    for name, row in results["benchmarks"].items():
        lines.append(
            f"| {name} | {row['problems']} | {row['k']} | {100 * row['avg@k']:.1f} | {100 * row['pass@k']:.1f} |"
        )
    settings = results.get("settings", {})
    if settings:
        lines.append("")
        lines.append("Sampling: " + ", ".join(f"{key} {value}" for key, value in settings.items()) + ".")
    return "\n".join(lines)


def replace_evaluation(card_text: str, table: str) -> str:
    """The card with its evaluation section replaced by ``table``."""
    if not _EVAL_SECTION.search(card_text):
        raise ValueError("the model card has no v05-eval markers; render it with v05_trl.model_card first")
    return _EVAL_SECTION.sub(lambda m: m.group(1) + table + m.group(2), card_text)


def _versions() -> dict[str, str]:
    found = {}
    for name in ("v05-trl", "trl", "transformers", "torch", "datasets"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def render_model_card(
    *,
    model_name: str,
    args,
    log_history: list[dict],
    base_model: str | None = None,
    dataset_name: str | None = None,
    hub_model_id: str | None = None,
    tags: set[str] | None = None,
    output_dir: str | Path | None = None,
):
    """A ``huggingface_hub.ModelCard`` for a V0.5 run (``args``: its ``V05GRPOConfig``)."""
    from huggingface_hub import ModelCard, ModelCardData

    card_data = ModelCardData(
        library_name="transformers",
        base_model=base_model,
        datasets=[dataset_name] if dataset_name else None,
        tags=sorted({"trl", "grpo", "v0.5", *(tags or ())}),
        model_name=model_name,
        pipeline_tag="text-generation",
    )
    evaluation = None
    results_path = Path(output_dir) / EVAL_RESULTS_FILE if output_dir is not None else None
    if results_path is not None and results_path.exists():
        evaluation = evaluation_table(json.loads(results_path.read_text()))
    return ModelCard.from_template(
        card_data,
        template_path=str(TEMPLATE),
        model_name=model_name,
        base_model=base_model,
        dataset_name=dataset_name,
        hub_model_id=hub_model_id,
        v05={key: getattr(args, key) for key in V05_SETTINGS},
        usage=training_usage(log_history, args.max_num_generations),
        evaluation=evaluation,
        versions=_versions(),
    )
