#!/usr/bin/env bash
# session 31, call 7: 16 warps for few-block decode attention (x16) against main (c2), untuned
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
for m in tinyllama-1.1b gpt2-124m llama-3.2-1b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  bt="1,16"; [ $m != tinyllama-1.1b ] && bt=1
  for i in 1 2; do
    for v in c2 x16; do
      E=$B/bench/minfer_e2e_bench; [ $v = x16 ] && E=$B/old/x16/bench/minfer_e2e_bench
      $E --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches $bt --prefill-tokens 16 --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e_${m}_${v}_$i.json | sed -n '1p;4p' | tr '\n' ' ')"
    done
  done
  rm -rf /dev/shm/w_$m
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
