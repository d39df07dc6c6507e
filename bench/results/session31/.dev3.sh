#!/usr/bin/env bash
# session 31, call 3: where blocks land (smid), and old/new/v5 on TinyLlama and Llama-3.2-1B untuned
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
exe() { case $1 in old) echo $B/old/main/bench/minfer_e2e_bench;; new) echo $B/bench/minfer_e2e_bench;; *) echo $B/old/$1/bench/minfer_e2e_bench;; esac; }
$B/smid | tee $OUT/r/smid.txt
for m in tinyllama-1.1b llama-3.2-1b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  for i in 1 2; do
    for v in old new v5; do
      $(exe $v) --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1,16 --prefill-tokens 16 --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e_${m}_${v}_$i.json | sed -n '1p;4p' | tr '\n' ' ')"
    done
  done
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
