#!/usr/bin/env bash
# session 32, call 1: GPU tests of the attention warps as a tile; tuned A/B old(main)/new on TinyLlama and GPT-2
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
exe() { case $1 in old) echo $B/old/main/bench/minfer_e2e_bench;; new) echo $B/bench/minfer_e2e_bench;; esac; }
ts tests
timeout 280 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionDecodeGpu.*:Autotune.*:Fixtures/EndToEnd.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=" $OUT/r/tests.txt | tail -8
for m in tinyllama-1.1b gpt2-124m; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  timeout 150 $B/tools/minferc autotune examples/$m.ir --buckets decode:1,decode:9-16 --in-step --weights /dev/shm/w_$m > $OUT/r/tune_$m.log 2>&1
  ts "tuned $m rc=$?"; grep -E "keeps" $OUT/r/tune_$m.log
  for i in 1 2; do
    for v in old new; do
      timeout 40 $(exe $v) --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1,16 --prefill-tokens 16 --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e_${m}_${v}_$i.json | sed -n '1p;4p' | tr '\n' ' ')"
    done
  done
  rm -rf /dev/shm/w_$m
done
cp $MINFER_CACHE_DIR/tuning/*.json $OUT/r/ 2>/dev/null
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
