"""recipes/: every config parses against the script's dataclasses; the CPU smoke recipe runs under accelerate."""

import dataclasses
import importlib.util
import os
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, free_port
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


def launch(tmp_path, model_path, *accelerate_args, extra=()):
    output_dir = tmp_path / "run"
    command = [sys.executable, "-m", "accelerate.commands.launch", *accelerate_args, str(RECIPES / "v05_grpo.py"),
               "--config", str(RECIPES / "configs" / "cpu_smoke.yaml"), "--model_name_or_path", str(model_path),
               "--output_dir", str(output_dir), *extra]  # fmt: skip
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return output_dir


def check_run(output_dir):
    for name in ("model.safetensors", "config.json", "tokenizer.json", "README.md"):
        assert (output_dir / name).exists(), name
    card = (output_dir / "README.md").read_text()
    assert "gsm8k_test" in card and "| optimizer steps | 2 |" in card


def test_cpu_smoke_recipe_one_process(tiny_model_path, tmp_path):
    check_run(launch(tmp_path, tiny_model_path, "--cpu", "--num_processes", "1"))


def test_cpu_smoke_recipe_two_processes(tiny_model_path, tmp_path):
    args = ("--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--main_process_port", str(free_port()))  # fmt: skip
    check_run(launch(tmp_path, tiny_model_path, *args, extra=("--per_device_train_batch_size", "4")))
