#!/usr/bin/env bash
# session 32, call 6: GemmKernel shapes (in-place residual, tails) on the wide stores; TinyLlama prefill tuned
# against torch.compile on the same weights, same call
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
ts tests
timeout 170 $B/tests/minfer_gpu_tests --gtest_filter='Shapes/GemmKernel.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|^\[       OK" $OUT/r/tests.txt | tail -10
m=tinyllama-1.1b
timeout 170 python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out $OUT/r/torch_$m.json --decode-batches 1 --decode-steps 4 --context 16 > $OUT/r/torch_$m.log 2>&1
ts "torch rc=$? $(python3 -c "
import json; d=json.load(open('$OUT/r/torch_$m.json')); print([(p['tokens'], round(p['compile_ms'],3)) for p in d['prefill']])" 2>&1 | head -c 300)"
if [ $(el) -lt 330 ]; then
  timeout 150 $B/tools/minferc autotune examples/$m.ir --buckets prefill:1-512,prefill:513-2048 --in-step --weights /dev/shm/w_$m > $OUT/r/tune_$m.log 2>&1
  ts "tuned rc=$?"; grep -E "keeps|tuned now" $OUT/r/tune_$m.log | cut -c1-300
fi
for i in 1 2; do
  [ $(el) -gt 500 ] && break
  timeout 40 $B/bench/minfer_e2e_bench --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --out $OUT/r/e2e_${m}_tuned_$i.json > $OUT/r/e2e_${m}_tuned_$i.log 2>&1
  ts "tuned e2e $i: $(python3 -c "
import json
d=json.load(open('$OUT/r/e2e_${m}_tuned_$i.json'))
print([(r.get('tokens'), round(r.get('ms',0),3)) for r in d.get('prefill',[])])" 2>&1 | head -c 200)"
done
cp $MINFER_CACHE_DIR/tuning/*.json $OUT/r/ 2>/dev/null
rm -rf /dev/shm/w_$m
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
