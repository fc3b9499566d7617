"""recipes/: every config parses against the script's dataclasses; the CPU smoke recipe runs under accelerate."""

import dataclasses
import importlib.util
import sys

import pytest
import yaml
from conftest import ROOT, accelerate_launch, two_cpu_processes
from trl import ModelConfig

from v05_trl import V05GRPOConfig

RECIPES = ROOT / "recipes"


def load_recipe():
    spec = importlib.util.spec_from_file_location("v05_grpo", RECIPES / "v05_grpo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["v05_grpo"] = module  # dataclasses resolve their module's namespace
    spec.loader.exec_module(module)
    return module


recipe = load_recipe()


@pytest.mark.parametrize("config", sorted((RECIPES / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_config_key_is_a_field_of_the_recipe(config):
    fields = {
        f.name for cls in (recipe.MathScriptArguments, V05GRPOConfig, ModelConfig) for f in dataclasses.fields(cls)
    }
    settings = yaml.safe_load(config.read_text())
    assert set(settings) - fields == set()
    if settings.get("overlong_buffer_length"):
        assert settings["reward_range"][0] <= -1.0  # the punishment's range is inside the declared one


@pytest.mark.parametrize("config", sorted((RECIPES / "accelerate").glob("*.yaml")), ids=lambda p: p.name)
def test_accelerate_configs_parse(config):
    settings = yaml.safe_load(config.read_text())
    assert settings["distributed_type"] in {"NO", "MULTI_GPU", "DEEPSPEED", "FSDP"}


def test_overlong_punishment_needs_a_reward_range_that_holds_it(tmp_path):
    script_args = recipe.MathScriptArguments(overlong_buffer_length=4)
    args = V05GRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, per_device_train_batch_size=8)
    with pytest.raises(ValueError, match="reward_range"):
        recipe.build_reward_funcs(script_args, args)
    args.reward_range = [-1.0, 1.0]
    assert len(recipe.build_reward_funcs(script_args, args)) == 2


def launch(tmp_path, model_path, *launch_flags, extra=()):
    output_dir = tmp_path / "run"
    accelerate_launch(launch_flags, RECIPES / "v05_grpo.py", "--config", RECIPES / "configs" / "cpu_smoke.yaml",
                      "--model_name_or_path", model_path, "--output_dir", output_dir, *extra, cwd=ROOT)  # fmt: skip
    return output_dir


def check_run(output_dir):
    for name in ("model.safetensors", "config.json", "tokenizer.json", "README.md"):
        assert (output_dir / name).exists(), name
    card = (output_dir / "README.md").read_text()
    assert "gsm8k_test" in card and "| optimizer steps | 2 |" in card


def test_cpu_smoke_recipe_one_process(tiny_model_path, tmp_path):
    check_run(launch(tmp_path, tiny_model_path, "--cpu", "--num_processes", "1"))


def test_cpu_smoke_recipe_two_processes(tiny_model_path, tmp_path):
    extra = ("--per_device_train_batch_size", "4")
    check_run(launch(tmp_path, tiny_model_path, *two_cpu_processes(), extra=extra))
