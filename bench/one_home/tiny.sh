#!/bin/bash
# A home on a small filesystem.  1: a fresh home on a 12 MB tmpfs.  2: a home on a 64 MB tmpfs
# filled (a filler file, as another program would) once the prepare step has stored its first
# asset; then the filler removed and `simab resume`.
source "$(dirname "$0")/env.sh"
T=$ONE_HOME/tiny; mkdir -p $T; umount $T 2>/dev/null
mount -t tmpfs -o size=12m tmpfs $T
export SIMAB_HOME=$T/home
echo "== 1: fresh home, 12 MB tmpfs; $(uptime)"
t0=$(date +%s.%N); /usr/bin/time -f "%e s wall, %U+%S s CPU, exit %x" .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t0
ls -la $T
umount $T
mount -t tmpfs -o size=64m tmpfs $T
echo "== 2: 64 MB tmpfs filled during prepare; $(uptime)"
t0=$(date +%s.%N)
( /usr/bin/time -f "run: %e s wall, %U+%S s CPU, exit %x" .venv/bin/simab run 2>&1 | python3 $HERE/stamp.py $t0 > $ONE_HOME/tiny_run.out ) &
RUN=$!
while [ -z "$(ls $SIMAB_HOME/assets/*.parquet 2>/dev/null)" ]; do sleep 0.2; done
dd if=/dev/zero of=$T/filler bs=64k 2>/dev/null; df -k $T | tail -1
echo "filled at $(python3 -c "import time; print(round(time.time() - $t0, 1))") s"
wait $RUN
cat $ONE_HOME/tiny_run.out
ls -la $SIMAB_HOME $SIMAB_HOME/assets | head -50
rm $T/filler; df -k $T | tail -1
echo "== resume; $(uptime)"
t0=$(date +%s.%N); /usr/bin/time -f "resume: %e s wall, %U+%S s CPU, exit %x" .venv/bin/simab resume 2>&1 | python3 $HERE/stamp.py $t0 > $ONE_HOME/tiny_resume.out
cat $ONE_HOME/tiny_resume.out
.venv/bin/python $HERE/readback.py $SIMAB_HOME
du -sh $SIMAB_HOME
umount $T
