import fnmatch
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from conftest import ROOT
from setuptools.config.pyprojecttoml import read_configuration

import v05_trl
from v05_trl.math_data import BENCHMARK_DIR
from v05_trl.model_card import TEMPLATE, evaluation_table, render_model_card, replace_evaluation, training_usage

ARGS = SimpleNamespace(value_prior="history", num_generations=4, max_num_generations=16, rollout_cost=1 / 256,
                       noise_model="worst_case", osla_mode="planned", max_rollout_rounds=1, reward_range=[0.0, 1.0],
                       loss_type="dapo", beta=0.0)  # fmt: skip
HISTORY = [
    {"v05/completions": 40, "v05/rollouts_per_prompt/mean": 5.0, "v05/prior_rejected_frac": 0.5, "v05/prior_coverage": 1.0},
    {"v05/completions": 32, "v05/rollouts_per_prompt/mean": 4.0, "v05/prior_rejected_frac": 0.0, "v05/prior_coverage": 1.0},
]  # fmt: skip
RESULTS = {"benchmarks": {"aime24": {"problems": 30, "k": 16, "avg@k": 0.125, "pass@k": 0.4}},
           "settings": {"temperature": 0.6}}  # fmt: skip


def front_matter(text):
    return yaml.safe_load(text.split("---\n")[1])


def test_usage_from_the_log_history():
    usage = training_usage(HISTORY, 16)
    assert usage["completions"] == 72 and usage["completions_at_k_max"] == 16 * 16
    assert usage["rollouts_per_prompt"] == 4.5 and usage["prior_rejected"] == 0.25
    assert training_usage([{"loss": 1.0}], 16)["steps"] == 0


def test_card_front_matter_and_content(tmp_path):
    (tmp_path / "eval_results.json").write_text(json.dumps(RESULTS))
    card = render_model_card(model_name="my-model", args=ARGS, log_history=HISTORY, base_model="Qwen/Qwen3-0.6B",
                             dataset_name="gsm8k_train", tags={"custom"}, output_dir=tmp_path)  # fmt: skip
    text = str(card)
    metadata = front_matter(text)
    assert {"trl", "grpo", "v0.5", "custom"} <= set(metadata["tags"])
    assert metadata["base_model"] == "Qwen/Qwen3-0.6B" and metadata["datasets"] == ["gsm8k_train"]
    assert metadata["library_name"] == "transformers" and metadata["pipeline_tag"] == "text-generation"
    assert "| rollouts per prompt actually used (mean over steps) | 4.5 |" in text
    assert "| aime24 | 30 | 16 | 12.5 | 40.0 |" in text
    for arxiv in ("2603.10848", "2602.03584"):
        assert arxiv in text
    assert "vonwerra2020trl" in text


def test_replace_evaluation_swaps_only_the_marked_section(tmp_path):
    text = str(render_model_card(model_name="m", args=ARGS, log_history=HISTORY))
    assert "No evaluation yet" in text
    updated = replace_evaluation(text, evaluation_table(RESULTS))
    assert "No evaluation yet" not in updated and "| aime24 |" in updated
    assert updated.split("## Evaluation")[0] == text.split("## Evaluation")[0]
    with pytest.raises(ValueError, match="markers"):
        replace_evaluation("# a card without markers", "table")


def test_template_and_benchmarks_ship_in_the_wheel():
    globs = read_configuration(ROOT / "pyproject.toml")["tool"]["setuptools"]["package-data"]["v05_trl"]
    package = Path(v05_trl.__file__).parent
    files = [TEMPLATE, *BENCHMARK_DIR.glob("*.jsonl"), *(BENCHMARK_DIR / "licenses").iterdir()]
    for path in files:
        assert any(fnmatch.fnmatch(str(path.relative_to(package)), g) for g in globs), path
