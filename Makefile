# `make train`: set up .venv and train CartPole with the default config.
# `make test`:  set up (or reuse) .venv and run the whole test suite (2 pytest-xdist workers).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install train test lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,plot]'
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(BIN)/muzero train --config configs/cartpole.yaml $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=15 $(ARGS)

clean:
	rm -rf $(VENV) *.egg-info
