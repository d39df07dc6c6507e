#!/usr/bin/env bash
# session 33, call 3: GemmKernel shapes (in-place residuals, tails) on the new epilogues; Llama-2-7B prefill
# untuned old/new and torch.compile on the same weights, same call
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
ts tests
timeout 320 $B/tests/minfer_gpu_tests --gtest_filter='Shapes/GemmKernel.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|^\[       OK" $OUT/r/tests.txt | tail -10
m=llama-2-7b
timeout 150 python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out $OUT/r/torch_$m.json --decode-batches 1 --decode-steps 4 --context 16 > $OUT/r/torch_$m.log 2>&1
ts "torch rc=$? $(python3 -c "
import json; d=json.load(open('$OUT/r/torch_$m.json')); print([(p['tokens'], round(p['compile_ms'],3)) for p in d['prefill']])" 2>&1 | head -c 300)"
for i in 1 2; do
  for v in new old; do
    [ $(el) -gt 540 ] && break
    exe=$B/bench/minfer_e2e_bench; [ $v = old ] && exe=$B/old/main/bench/minfer_e2e_bench
    timeout 50 $exe --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --no-tune --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
    ts "$m $v $i: $(python3 -c "
import json
d=json.load(open('$OUT/r/e2e_${m}_${v}_$i.json'))
print([(r.get('tokens'), round(r.get('ms',0),3)) for r in d.get('prefill',[])])" 2>&1 | head -c 200)"
  done
done
rm -rf /dev/shm/w_$m
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
