#!/usr/bin/env bash
# session 33, call 4: GemmKernel n321_k200 (the shape call 3's timeout cut); the residual's ping-pong variants
# on Llama-2-7B's 2048-row residual gemms: old (main), new, v1 (ping-pong: no load under the last wgmmas),
# v2 (v1 and a row at a time), alternated three times
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
ts tests
timeout 120 $B/tests/minfer_gpu_tests --gtest_filter='Shapes/GemmKernel.*n321_k200*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|^\[       OK" $OUT/r/tests.txt | tail -4
F='wgmma_(m128n128_s7(_pp)?_epi_residual|m128n176_s5_pp_epi_residual|m64n128_s8_epi_none) M=2048 N=4096'
for i in 1 2 3; do
  for v in old new v1 v2; do
    [ $(el) -gt 330 ] && break
    kb=$B/bench/minfer_kernel_bench; [ $v = old ] && kb=$B/old/main/bench/minfer_kernel_bench
    [ $v = v1 ] && kb=$B/old/kb_v1; [ $v = v2 ] && kb=$B/old/kb_v2
    timeout 60 $kb --suite gemm_fused --filter "$F" --out $OUT/r/kb_${v}_$i.json > $OUT/r/kb_${v}_$i.log 2>&1
    ts "kb $v $i rc=$?"
  done
done
python3 - $OUT/r <<'PY'
import json,sys,glob,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/kb_*.json')):
    v=f.split('kb_')[1][:-5].rsplit('_',1)[0]
    try:
        for r in json.load(open(f)): d[(r['shape'],r['kernel'].split('_wgmma_')[1])][v].append(r['ms']*1e3)
    except Exception as e: print(f, e)
for (s,k),x in sorted(d.items()):
    print(f"{s:22s} {k:30s} " + "  ".join(f"{v} " + " ".join(f"{t:6.1f}" for t in x[v]) for v in ['old','new','v1','v2']))
PY
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
