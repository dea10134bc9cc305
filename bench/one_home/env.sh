# Sourced by the scripts of bench/one_home: the repository ($ROOT, the working directory), the
# scratch folder ($ONE_HOME, /tmp/one_home unless set) and the small world every lifecycle here
# runs on: the tests' planted lifecycle (tests/conftest.py PLANTED_SETTINGS: 40 users, 50 movies).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export ONE_HOME=${ONE_HOME:-/tmp/one_home}
mkdir -p "$ONE_HOME"
cd "$ROOT"
export PYTHONPATH=$ROOT SIMAB_SOURCE=local SIMAB_LOCAL_PATH=$ONE_HOME/world/ml-1m SIMAB_ARMS=random,pop SIMAB_AGENTS=12 SIMAB_TRUST_PROTOCOLS=off SIMAB_MAX_EPOCHS=1
unset DAGSTER_HOME MLFLOW_TRACKING_URI
[ -d "$SIMAB_LOCAL_PATH" ] || .venv/bin/python -c "
from pathlib import Path
from fakes.planted_data import planted_movielens, write_ml1m
write_ml1m(Path('$SIMAB_LOCAL_PATH'), *planted_movielens(seed=5, n_users=40, n_movies=50, ratings_per_user=15))"
