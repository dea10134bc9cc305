# The two commands of the README: `make demo` and `make test`.  Both set up first.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# Every store follows $SIMAB_HOME (data/ unless set): the Dagster instance is
# $SIMAB_HOME/dagster_home unless DAGSTER_HOME is set, the MLflow store $SIMAB_HOME/mlflow.db
# (pipelines/home.py); `simab` is the project's console script (pipelines/cli.py).
SIMAB := $(BIN)/simab

.PHONY: setup demo demo-ml1m experiments experiments-ml1m resume test test-fast ui mlflow-ui viewer settings report bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)

# torch/torchvision come from the wheels already on this machine's disk (pip's find-links);
# everything else from PyPI, pinned in pyproject.toml.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

setup: $(VENV)/.installed

# The lifecycle runner writes the instance's dagster.yaml itself (pipelines/instance.py).
demo: setup
	$(SIMAB) run

# After a kill or a failure: skip the steps that succeeded, re-execute what failed or never finished.
resume: setup
	$(SIMAB) resume

# The real-data run of the closing notes: ML-1M (users 1-1999) with the local metadata and
# posters from ../shared/data, in its own $SIMAB_HOME so it never mixes with the demo.
SHARED ?= $(CURDIR)/../shared/data
ML1M_HOME ?= $(CURDIR)/data/ml1m
ML1M_ENV = SIMAB_HOME=$(ML1M_HOME) SIMAB_SOURCE=local SIMAB_LOCAL_PATH=$(SHARED)/ml-1m \
	SIMAB_METADATA_SOURCE=local SIMAB_METADATA_PATH=$(SHARED)/ml-1m-metadata/movies_extrainfos.dat \
	SIMAB_POSTER_DIRS=$(SHARED)/ml-1m-posters-tmdb:$(SHARED)/ml-1m-posters SIMAB_LINKS_PATH=$(SHARED)/ml-1m-links/ml1m_links.csv
demo-ml1m: setup
	$(ML1M_ENV) $(SIMAB) run --arms random,pop,fm,deepfm

# The papers' experiments, each printing its table beside the paper's (pipelines/experiments.py);
# tables under $(SIMAB_HOME)/experiments/<name>/.  Steps already materialised are reused.
EXPERIMENTS ?= table2 table3 table4 table5 thumbnails causal believability
experiments: setup
	$(BIN)/python -m pipelines.experiments $(EXPERIMENTS) --reuse

experiments-ml1m: setup
	$(ML1M_ENV) $(BIN)/python -m pipelines.experiments $(EXPERIMENTS) --reuse

test: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder

# While changing one stage: the tests that run no whole lifecycle (files not marked slow or
# e2e), about a fifth of the suite's CPU; `make test` before a commit.
test-fast: setup
	$(BIN)/python -m pytest -q -n 2 -m "not slow and not e2e"

# The instance config (telemetry off, run monitoring on) and runs of killed runners marked failed,
# then `dagster dev` on the home's instance.
ui: setup
	$(SIMAB) ui

# The MLflow UI on the home's tracking store.
mlflow-ui: setup
	$(SIMAB) mlflow

# The trajectory viewer over the stored assets (data/ or $SIMAB_HOME), on 127.0.0.1 only.
VIEWER_PORT ?= 8050
viewer: setup
	$(SIMAB) viewer --port $(VIEWER_PORT)

settings: setup
	$(SIMAB) settings

report: setup
	$(SIMAB) report

# The benchmarks under bench/, one line each: run one with `$(BIN)/python -m bench.<name> --help`
# (docs/development.md#benchmarks says what each measures).
bench: setup
	@$(BIN)/python -c 'import ast, pathlib; [print(f"python -m bench.{p.stem:<18}", ast.get_docstring(ast.parse(p.read_text())).splitlines()[0]) for p in sorted(pathlib.Path("bench").glob("[a-z]*.py"))]'

clean:
	rm -rf data/assets data/mlflow.db data/mlartifacts data/dagster_home
