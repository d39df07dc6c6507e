#!/usr/bin/env bash
# session 32, call 4: ncu — why a pair of blocks (cluster of 2, W multicast) is slower than single blocks on
# TinyLlama's 512-row gemms, against cuBLAS on the same shapes; and the prefill attention GPU test on main's kernel
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
S="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats --section ComputeWorkloadAnalysis"
i=0
for f in 'n2560_k2048_wgmma_m128n80_s8_epi_none M=512 ' 'n2560_k2048_wgmma_m128n80_s8_c2_epi_none M=512 ' 'n2048_k2048_wgmma_m64n128_s8_epi_none M=512 ' 'n2048_k2048_wgmma_m64n128_s8_c2_epi_none M=512 '; do
  i=$((i+1))
  timeout 90 ncu --kernel-name regex:gemmWgmma --launch-skip 3 --launch-count 1 $S $B/bench/minfer_kernel_bench --suite gemm_fused --filter "$f" > $OUT/r/ncu_$i.txt 2>&1
  ts "ncu $i rc=$? $f: $(grep -E 'Duration' $OUT/r/ncu_$i.txt | head -1)"
done
cat > /tmp/cb.py <<'PY'
import torch,sys
m,n,k=map(int,sys.argv[1:4])
a=torch.randn(m,k,device='cuda',dtype=torch.bfloat16); w=torch.randn(n,k,device='cuda',dtype=torch.bfloat16)
c=torch.empty(m,n,device='cuda',dtype=torch.bfloat16)
for _ in range(6): torch.matmul(a,w.t(),out=c)
torch.cuda.synchronize()
PY
for shape in "512 2560 2048" "512 2048 2048"; do
  i=$((i+1))
  timeout 90 ncu --kernel-name regex:"nvjet|gemm|xmma|cutlass" --launch-skip 3 --launch-count 1 $S python3 /tmp/cb.py $shape > $OUT/r/ncu_$i.txt 2>&1
  ts "ncu $i rc=$? cublas $shape: $(grep -E 'Duration' $OUT/r/ncu_$i.txt | head -1) $(grep -m1 -oE 'nvjet[a-z0-9_]*|sm90_[a-z0-9_]*' $OUT/r/ncu_$i.txt)"
done
ts tests
timeout 200 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionPrefillGpu.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=" $OUT/r/tests.txt | tail -8
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
