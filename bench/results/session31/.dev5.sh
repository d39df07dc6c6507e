#!/usr/bin/env bash
# session 31, call 5: early tiles — attention tests; tuned A/B old(main)/c1(cd09bc0)/new on TinyLlama, Llama-3.2-1B, 7B
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
exe() { case $1 in old) echo $B/old/main/bench/minfer_e2e_bench;; new) echo $B/bench/minfer_e2e_bench;; *) echo $B/old/$1/bench/minfer_e2e_bench;; esac; }
ts tests
timeout 150 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionDecodeGpu.*' > $OUT/r/tests_attn.txt 2>&1; echo rc=$? >> $OUT/r/tests_attn.txt
tail -2 $OUT/r/tests_attn.txt
for m in tinyllama-1.1b llama-3.2-1b llama-2-7b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  bk="decode:1,decode:9-16"; bt="1,16"; [ $m = llama-2-7b ] && bk="decode:9-16" && bt=16
  $B/tools/minferc autotune examples/$m.ir --buckets $bk --in-step --weights /dev/shm/w_$m > $OUT/r/tune_$m.log 2>&1
  ts "tuned $m rc=$?"
  for i in 1 2; do
    for v in old c1 new; do
      $(exe $v) --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches $bt --prefill-tokens 16 --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e_${m}_${v}_$i.json | sed -n '1p;4p' | tr '\n' ' ')"
    done
  done
  rm -rf /dev/shm/w_$m
done
cp $MINFER_CACHE_DIR/tuning/*.json $OUT/r/ 2>/dev/null
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
