#!/bin/bash
# The second `simab run` waits for the home (SIMAB_HOME_WAIT_S=600) instead of being refused.
source "$(dirname "$0")/env.sh"
export SIMAB_HOME=$ONE_HOME/waithome; rm -rf $SIMAB_HOME
t0=$(date +%s.%N)
( /usr/bin/time -f "first: %e s wall, %U+%S s CPU, exit %x" .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t0 > $ONE_HOME/wait_first.out ) &
FIRST=$!
sleep 8
SIMAB_HOME_WAIT_S=600 /usr/bin/time -f "second: %e s wall, %U+%S s CPU, exit %x" .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t0 > $ONE_HOME/wait_second.out
wait $FIRST
echo "$(uptime)" >> $ONE_HOME/wait_second.out
