# Two-command setup: `make demo` and `make test` each create .venv on first use (idempotent).
# torch is pinned first: on a CPU machine pip then takes the CPU build; on a GPU machine the
# same pin is the CUDA build that vllm 0.31 pins too.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
STAMP := $(VENV)/.installed

.PHONY: setup demo test format clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install "torch==$(TORCH_VERSION)"
	$(BIN)/python -m pip install -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

# A short V0.5 training of the tiny offline model on CPU (under a minute); writes outputs/demo.
demo: $(STAMP)
	HF_HUB_OFFLINE=1 $(BIN)/python -m v05_trl.demo --output-dir outputs/demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis results outputs
