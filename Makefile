# `make install`:     set up .venv with every extra the tests need (`.[all]`: ray, atari, minatar, plot, video, docs, dev).
# `make train`:       set up (or reuse) .venv and train CartPole with the default config (ARGS="--set ..." adds flags).
# `make test`:        the whole test suite (2 pytest-xdist workers); ARGS="-k name" to pick tests.
# `make lint`:        ruff check and ruff format --check over the tree (fails on any finding).
# `make format`:      ruff format and the safe ruff fixes, in place.
# `make bench`:       scripts/bench_cartpole.py: CartPole from scratch on 3 seeds, into runs/bench_cartpole.
# `make bench-throughput`: scripts/bench_throughput.py: FLOP rates, step FLOPs, self-play and the two loops, into runs/bench_throughput.
# `make soak`:        scripts/soak.py: 60 minutes of a small run under random faults (SIGKILLs, full disk,
#                     corrupted checkpoints), checked after each, into runs/soak/latest (ARGS="--minutes 5").
# `make tensorboard`: TensorBoard on runs/ (LOGDIR=... for another folder; PORT=6006).
# `make docs`:        the documentation site (MkDocs) into site/, --strict: a broken link fails;
#                     the config reference (docs/config.md) is regenerated from muzero/config.py first.
# `make config-docs`: only regenerate docs/config.md (scripts/config_reference.py); tests/test_docs.py
#                     fails while the committed page differs from what it writes.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOGDIR ?= runs
PORT ?= 6006

.PHONY: install train test lint format bench bench-throughput soak tensorboard docs config-docs clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(BIN)/muzero train --config configs/cartpole.yaml $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=15 $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: $(STAMP)
	$(BIN)/python scripts/bench_cartpole.py $(ARGS)

bench-throughput: $(STAMP)
	$(BIN)/python scripts/bench_throughput.py $(ARGS)

soak: $(STAMP)
	$(BIN)/python scripts/soak.py $(ARGS)

tensorboard: $(STAMP)
	$(BIN)/tensorboard --logdir $(LOGDIR) --port $(PORT)

config-docs: $(STAMP)
	$(BIN)/python scripts/config_reference.py

docs: config-docs
	$(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) *.egg-info site
