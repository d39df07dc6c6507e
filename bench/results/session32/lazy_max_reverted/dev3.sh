#!/usr/bin/env bash
# session 32, call 3: lazy max in the wgmma prefill attention — GPU tests; kernel A/B (attention suite); e2e prefill A/B untuned
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
ts tests
timeout 260 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionPrefillGpu.*:Fixtures/EndToEnd.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=" $OUT/r/tests.txt | tail -8
ts kernels
for i in 1 2; do
  for v in old new; do
    kb=$B/bench/minfer_kernel_bench; [ $v = old ] && kb=$B/old/main/bench/minfer_kernel_bench
    timeout 60 $kb --suite attention --filter 'prefill.*wgmma.*tokens=(512|2048) ' --out $OUT/r/attn_${v}_$i.json > $OUT/r/attn_${v}_$i.log 2>&1
    ts "attn $v $i rc=$?"
  done
done
python3 - $OUT/r <<'PY'
import json,sys,glob,collections
d=collections.defaultdict(dict)
for f in sorted(glob.glob(sys.argv[1]+'/attn_*.json')):
    v=f.split('attn_')[1][:-5]
    for r in json.load(open(f)): d[r['kernel']+' '+r['shape'].split('tokens=')[1].split()[0]][v]=r['ms']*1e3
for k,x in sorted(d.items()): print(k, ' '.join(f"{v}={x[v]:.1f}" for v in sorted(x)))
PY
for m in tinyllama-1.1b llama-2-7b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  for i in 1 2; do
    for v in old new; do
      exe=$B/bench/minfer_e2e_bench; [ $v = old ] && exe=$B/old/main/bench/minfer_e2e_bench
      timeout 60 $exe --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --no-tune --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(python3 -c "
import json,sys
d=json.load(open('$OUT/r/e2e_${m}_${v}_$i.json'))
print([ (r.get('tokens'), round(r.get('ms',0),3)) for r in d.get('prefill',[])] if isinstance(d,dict) else d)
" 2>&1 | head -c 300)"
    done
  done
  rm -rf /dev/shm/w_$m
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
