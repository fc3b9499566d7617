"""Shared fixtures. The whole suite runs offline: no Hub access, tiny models built on the spot."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on now, for the rendezvous of a multi-process launch."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def two_cpu_processes() -> tuple[str, ...]:
    """``accelerate launch`` flags for two processes on CPU (gloo), with a fresh rendezvous port."""
    return ("--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
            "--dynamo_backend", "no", "--main_process_port", str(free_port()))  # fmt: skip


def accelerate_launch(launch_flags, script, *script_args, env=None, cwd=None) -> None:
    """Run ``accelerate launch`` on CPU (CUDA hidden) and fail the test with the end of stderr unless it succeeds."""
    import subprocess
    import sys

    command = [sys.executable, "-m", "accelerate.commands.launch", *launch_flags, str(script), *map(str, script_args)]
    env = {**os.environ, **(env or {}), "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=cwd)
    assert done.returncode == 0, done.stderr[-4000:]


def load_script(name: str):
    """Import ``scripts/<name>.py`` as a module (scripts are not part of the package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory):
    """Folder holding a 2-layer Qwen3 causal LM and its byte-level BPE tokenizer (ChatML), loadable offline."""
    from v05_trl.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-qwen3"))
