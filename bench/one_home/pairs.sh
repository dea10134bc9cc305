#!/bin/bash
# Two `simab run` on one fresh home (not made beforehand), the second D seconds after the first;
# the first left to complete.  The small world of env.sh.
source "$(dirname "$0")/env.sh"
for D in "$@"; do
  export SIMAB_HOME=$ONE_HOME/pair$D; rm -rf $SIMAB_HOME
  t0=$(date +%s.%N)
  ( /usr/bin/time -f "first: %e s wall, %U+%S s CPU, exit %x" nice -n 10 .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t0 > $ONE_HOME/first$D.out ) &
  FIRST=$!
  sleep $D
  t1=$(date +%s.%N)
  /usr/bin/time -f "second: %e s wall, %U+%S s CPU, exit %x" .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t1 > $ONE_HOME/second$D.out
  echo "D=$D $(uptime)" >> $ONE_HOME/pairs.load
  wait $FIRST
  echo "D=$D end $(uptime)" >> $ONE_HOME/pairs.load
done
