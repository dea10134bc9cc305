# The two commands of the README: `make demo` and `make test`.  Both set up first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
export GX_ANALYTICS_ENABLED := False
export HF_HUB_OFFLINE := 1
export DAGSTER_HOME ?= $(CURDIR)/data/dagster_home

.PHONY: setup demo test ui mlflow-ui bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch/torchvision come from the wheels already on this machine's disk (pip's find-links);
# everything else from PyPI, pinned in pyproject.toml.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	mkdir -p $(DAGSTER_HOME) && touch $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/python -m pipelines.lifecycle

test: setup
	$(BIN)/python -m pytest -q

ui: setup
	mkdir -p $(DAGSTER_HOME) && touch $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -w workspace.yaml

mlflow-ui: setup
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow ui --workers 1 --backend-store-uri sqlite:///$(CURDIR)/data/mlflow.db

clean:
	rm -rf data/assets data/mlflow.db data/mlartifacts data/dagster_home
