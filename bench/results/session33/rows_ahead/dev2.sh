#!/usr/bin/env bash
# session 33, call 2: + the qkv rows and rotations loaded ahead (cooperative tiles) — GPU tests; kernel A/B three times; e2e prefill untuned
# qkv epilogue's wide stores — GPU tests; kernel A/B on the residual and qkv tiles with cuBLAS
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
ts tests
timeout 290 $B/tests/minfer_gpu_tests --gtest_filter='FusedMatmul.*:GemmKernelEpilogues.*:Fixtures/EndToEnd.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|\[ fused \]" $OUT/r/tests.txt | tail -8
ts tests done
F='wgmma_(m128n80_s8_epi_qkv_h32_kv4_d64_half|m128n160_s6_pp_epi_qkv_h32_kv4_d64_half|m128n128_s7(_pp)?_epi_qkv_h32_kv32_d128_half|m64n128_s8_epi_(residual|none)|m128n128_s7(_pp)?_epi_residual|m128n176_s5_pp_epi_residual|m128n80_s8_epi_none) M='
for i in 1 2 3; do
  for v in old new; do
    [ $(el) -gt 420 ] && break
    kb=$B/bench/minfer_kernel_bench; [ $v = old ] && kb=$B/old/main/bench/minfer_kernel_bench
    timeout 60 $kb --suite gemm_fused --filter "$F" --out $OUT/r/kb_${v}_$i.json > $OUT/r/kb_${v}_$i.log 2>&1
    ts "kb $v $i rc=$?"
  done
done
timeout 40 python3 bench/torch_baseline.py --shapes .dev1_shapes.json --out $OUT/r/torch.json > $OUT/r/torch.log 2>&1; ts "torch rc=$?"
python3 - $OUT/r <<'PY'
import json,sys,glob,collections
d=collections.defaultdict(dict)
for f in sorted(glob.glob(sys.argv[1]+'/kb_*.json')):
    v=f.split('kb_')[1][:-5]
    try:
        for r in json.load(open(f)): d[(r['shape'],r['kernel'].split('_wgmma_')[1])][v]=r['ms']*1e3
    except Exception as e: print(f, e)
t={}
try:
    for r in json.load(open(sys.argv[1]+'/torch.json'))['results']: t[r['shape']]=r['torch_ms']*1e3
except Exception as e: print(e)
for (s,k),x in sorted(d.items()):
    o=min(x.get('old_1',1e9),x.get('old_2',1e9),x.get('old_3',1e9)); n=min(x.get('new_1',1e9),x.get('new_2',1e9),x.get('new_3',1e9))
    print(f"{s:22s} {k:38s} old {x.get('old_1',0):6.1f} {x.get('old_2',0):6.1f} {x.get('old_3',0):6.1f}  new {x.get('new_1',0):6.1f} {x.get('new_2',0):6.1f} {x.get('new_3',0):6.1f}  cuBLAS {t.get(s,0):6.1f}  new/old {n/o:.3f}  vs cuBLAS {t.get(s,0)/n:.2f}x")
PY

m=tinyllama-1.1b
python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1; ts "weights rc=$?"
for i in 1 2; do
  for v in old new; do
    [ $(el) -gt 560 ] && break
    exe=$B/bench/minfer_e2e_bench; [ $v = old ] && exe=$B/old/main/bench/minfer_e2e_bench
    timeout 40 $exe --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --no-tune --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
    ts "$m $v $i: $(python3 -c "
import json
d=json.load(open('$OUT/r/e2e_${m}_${v}_$i.json'))
print([(r.get('tokens'), round(r.get('ms',0),3)) for r in d.get('prefill',[])])" 2>&1 | head -c 200)"
  done
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
