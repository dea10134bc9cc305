#!/bin/bash
# Runs launched from the Dagster UI (`simab ui`, its GraphQL) against `simab run` on one home.
source "$(dirname "$0")/env.sh"
.venv/bin/python "$HERE/ui_trials.py"
cat "$ONE_HOME/ui_trials.out"
