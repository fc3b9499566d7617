"""scripts/push_to_hub.py against a local stand-in for the Hub (HTTP on 127.0.0.1, reached through HF_ENDPOINT)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, load_script
from hub_stand_in import HubStandIn

push = load_script("push_to_hub")


@pytest.fixture(scope="module")
def trained_folder(tmp_path_factory):
    from v05_trl import demo

    folder = tmp_path_factory.mktemp("demo")
    demo.main(["--output-dir", str(folder), "--max-steps", "2", "--warm-start-steps", "2"])
    return folder


def test_push_uploads_weights_tokenizer_config_and_card_with_evaluation(trained_folder, tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(trained_folder, folder, ignore=shutil.ignore_patterns("base-model", "warm-start"))
    (folder / "checkpoint-1").mkdir()
    (folder / "checkpoint-1" / "optimizer.pt").write_bytes(b"x")
    results = {"benchmarks": {"math500": {"problems": 5, "k": 4, "avg@k": 0.5, "pass@k": 0.8}}, "settings": {}}
    (folder / "eval_results.json").write_text(json.dumps(results))
    with HubStandIn() as hub:
        env = dict(os.environ, HF_ENDPOINT=hub.url, HF_TOKEN="hf_stand_in", HF_HUB_OFFLINE="0")
        command = [sys.executable, str(ROOT / "scripts" / "push_to_hub.py"), str(folder), "--repo-id", "me/v05-demo"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        files = hub.repos["me/v05-demo"]
    for name in ("model.safetensors", "config.json", "tokenizer.json", "README.md", "eval_results.json"):
        assert name in files, name
    assert not any(path.startswith("checkpoint-") for path in files)
    card = files["README.md"].decode()
    assert "| math500 | 5 | 4 | 50.0 | 80.0 |" in card  # the evaluation replaced the placeholder
    assert HubStandIn.validate_card(card) == []


def test_an_incomplete_folder_is_refused_naming_what_is_missing(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="weights") as error:
        push.check_folder(tmp_path)
    assert "README.md" in str(error.value) and "tokenizer" in str(error.value)
