#!/usr/bin/env bash
# session 31, call 1: attention grid order + one chunk for short caches; 7B at 16 rows A/B/C
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv | tee $OUT/r/gpu.txt
ts tests
timeout 150 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionDecodeGpu.*:*Persistent*' > $OUT/r/tests_attn.txt 2>&1; echo rc=$? >> $OUT/r/tests_attn.txt
tail -3 $OUT/r/tests_attn.txt
ts weights
python3 bench/torch_e2e.py --model llama-2-7b --weights-out /dev/shm/w7 --out /dev/null --weights-only > $OUT/r/w7.log 2>&1
ts autotune
$B/tools/minferc autotune examples/llama-2-7b.ir --buckets decode:9-16 --in-step --weights /dev/shm/w7 > $OUT/r/tune7.log 2>&1; echo rc=$?
ts e2e
for i in 1 2; do
  for v in old new tw; do
    case $v in old) E=$B/old/main/bench/minfer_e2e_bench;; new) E=$B/bench/minfer_e2e_bench;; tw) E=$B/old/tw/bench/minfer_e2e_bench;; esac
    $E --model examples/llama-2-7b.ir --weights /dev/shm/w7 --decode-batches 16 --prefill-tokens 16 --out $OUT/r/e2e7_${v}_$i.json > $OUT/r/e2e7_${v}_$i.log 2>&1
    ts "$v $i: $(grep -o '"ms_per_step":[0-9.]*' $OUT/r/e2e7_${v}_$i.json | head -1) $(grep -o 'copy bandwidth [0-9]*' $OUT/r/e2e7_${v}_$i.log)"
  done
  [ $(( $(date +%s) - t0 )) -gt 430 ] && break
done
ts trace
timeout 100 python3 bench/trace_decode.py --model llama-2-7b --weights /dev/shm/w7 --build $B --batch 16 --out $OUT/r/trace7_new.json > $OUT/r/trace7.log 2>&1
tail -5 $OUT/r/trace7.log
ts done
cp $MINFER_CACHE_DIR/tuning/*.json $OUT/r/ 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
