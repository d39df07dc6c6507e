#!/usr/bin/env bash
# session 31, call 6: final code — GPU tests (EndToEnd, Persistent, attention, Session, Autotune); 7B 16 rows at context 4000, main vs this
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
ts tests
timeout 330 $B/tests/minfer_gpu_tests --gtest_filter='Fixtures/EndToEnd.*:*Persistent*:Heads/AttentionDecodeGpu.*:Session.*:Autotune.*' > $OUT/r/gpu_tests_final.txt 2>&1; echo rc=$? >> $OUT/r/gpu_tests_final.txt
grep -E "PASSED|FAILED|rc=" $OUT/r/gpu_tests_final.txt | tail -5
ts 7b
python3 bench/torch_e2e.py --model llama-2-7b --weights-out /dev/shm/w7 --out /dev/null --weights-only > $OUT/r/w7.log 2>&1
for i in 1 2; do
  for v in old new; do
    E=$B/bench/minfer_e2e_bench; [ $v = old ] && E=$B/old/main/bench/minfer_e2e_bench
    timeout 100 $E --model examples/llama-2-7b.ir --weights /dev/shm/w7 --decode-batches 16 --prefill-tokens 16 --context 4000 --decode-steps 16 --out $OUT/r/e2e7_ctx4000_${v}_$i.json > $OUT/r/e2e7_ctx4000_${v}_$i.log 2>&1
    ts "$v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e7_ctx4000_${v}_$i.json | head -1)"
  done
  [ $(( $(date +%s) - t0 )) -gt 520 ] && break
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
