#!/usr/bin/env bash
# Session 29: the engine's shared weights (tests), then the in-step pass's time with and without them.
set -u
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/x
timeout 150 $B/tests/minfer_gpu_tests --gtest_filter='WeightUpload.*:Autotune.*' > $OUT/x/gtests.txt 2>&1; echo "gtest rc $?" >> $OUT/x/gtests.txt
grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED \]|gtest rc" $OUT/x/gtests.txt
python3 bench/torch_e2e.py --model tinyllama-1.1b --weights-out /dev/shm/w --out /dev/null --weights-only > $OUT/x/w.log 2>&1
IR=examples/tinyllama-1.1b.ir; W=/dev/shm/w/model.safetensors
for which in old new; do
  rm -rf $MINFER_CACHE_DIR/tuning
  bin=$B/tools/minferc; [[ $which == old ]] && bin=$B/old/s29a/minferc
  start=$EPOCHREALTIME
  timeout 100 $bin autotune $IR --buckets decode:1 --in-step --weights $W > $OUT/x/tune_$which.log 2>&1
  awk -v a="$start" -v b="$EPOCHREALTIME" -v w=$which 'BEGIN { printf "%s autotune decode:1 %.1f s\n", w, b - a }' | tee -a $OUT/x/summary.txt
  grep -E "configurations timed|keeps|compile" $OUT/x/tune_$which.log | cut -c1-200 | tee -a $OUT/x/summary.txt
done
