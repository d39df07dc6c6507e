#!/usr/bin/env bash
# session 31, call 8: Llama-2-7B at one row, main before the session (old) against the final main (c2), untuned
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
python3 bench/torch_e2e.py --model llama-2-7b --weights-out /dev/shm/w7 --out /dev/null --weights-only > $OUT/r/w7.log 2>&1
for i in 1 2; do
  for v in old c2; do
    E=$B/bench/minfer_e2e_bench; [ $v = old ] && E=$B/old/main/bench/minfer_e2e_bench
    $E --model examples/llama-2-7b.ir --weights /dev/shm/w7 --decode-batches 1 --prefill-tokens 16 --out $OUT/r/e2e7_b1_${v}_$i.json > $OUT/r/e2e7_b1_${v}_$i.log 2>&1
    ts "$v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e7_b1_${v}_$i.json | head -1) $(grep -o '"fraction_of_copy": [0-9.]*' $OUT/r/e2e7_b1_${v}_$i.json | head -1)"
  done
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
