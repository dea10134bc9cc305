#!/bin/bash
# A backfill of every arm launched from the Dagster UI on $ONE_HOME/uihome (its prepare step
# stored by ui_trials.sh): the runs and arm-pool steps at once against the instance's limits.
source "$(dirname "$0")/env.sh"
.venv/bin/python "$HERE/backfill.py"
