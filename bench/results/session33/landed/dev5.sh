#!/usr/bin/env bash
# session 33, call 5: the landed form (ping-pong residual rows loaded a row at a time, v2 of call 4) — GPU
# tests FusedMatmul and EndToEnd; TinyLlama prefill untuned old/new
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
ts tests
timeout 200 $B/tests/minfer_gpu_tests --gtest_filter='FusedMatmul.*:Fixtures/EndToEnd.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|\[ fused \]" $OUT/r/tests.txt | tail -6
m=tinyllama-1.1b
[ $(el) -lt 215 ] && python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1; ts "weights rc=$?"
for v in old new; do
  [ $(el) -gt 245 ] && break
  exe=$B/bench/minfer_e2e_bench; [ $v = old ] && exe=$B/old/main/bench/minfer_e2e_bench
  timeout 30 $exe --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --no-tune --out $OUT/r/e2e_${m}_${v}.json > $OUT/r/e2e_${m}_${v}.log 2>&1
  ts "$m $v: $(python3 -c "
import json
d=json.load(open('$OUT/r/e2e_${m}_${v}.json'))
print([(r.get('tokens'), round(r.get('ms',0),3)) for r in d.get('prefill',[])])" 2>&1 | head -c 200)"
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
