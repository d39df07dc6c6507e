#!/usr/bin/env bash
# session 35 call 4: the final form (128-row cooperative tiles load both residual rows early; 64-row ones as
# before): GPU tests, kernel A/B against the late L2 prefetch alone, prefill against main and torch.compile
set -u
mkdir -p $OUT/r
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs MINFER_CACHE_DIR=/tmp/mc
OUT=$OUT/r/tests TEST_FILTER='FusedMatmul*:GemmKernelEpilogues*:Shapes/GemmKernel.*:Fixtures/EndToEnd*' \
  timeout 230 bench/run_gpu.sh build-carry tests > $OUT/r/tests.log 2>&1; echo "tests rc $?"
grep -E "^\[  (PASSED|FAILED) |tests? from .* ran|FAILED  \]" $OUT/r/tests.log | sort | uniq -c | head -20
F='(n2048_k2048|n4096_k4096|n2048_k5632|n4096_k11008)_wgmma_(m128n256_s4|m64n128_s8|m128n128_s7|m64n256_s5|m128n128_s7_pp)(_epi_residual_rowsq|_epi_residual) '
OUT=$OUT/r/kab KERNEL_SUITE=gemm_fused KERNEL_FILTER="$F" KERNEL_AB_BASE=build-carry/old/late/bench/minfer_kernel_bench AB_REPEATS=2 \
  timeout 130 bench/run_gpu.sh build-carry kernel_ab > $OUT/r/kab.log 2>&1
cut -c1-170 $OUT/r/kab/kernel_ab.txt | head -50
mkdir -p $OUT/r/e2e
for m in tinyllama-1.1b llama-2-7b; do
  w=/dev/shm/minfer-e2e-$m
  timeout 100 python3 bench/torch_e2e.py --model $m --weights-out $w --out $OUT/r/e2e/torch_$m.json --decode-batches '' --prefill-tokens 512,2048 > $OUT/r/e2e/torch_$m.log 2>&1
  tail -2 $OUT/r/e2e/torch_$m.log
  for i in 0 1; do
    for side in new main; do
      bin=build-carry/bench/minfer_e2e_bench; [[ $side == main ]] && bin=build-carry/old/main/bench/minfer_e2e_bench
      timeout 60 $bin --model examples/$m.ir --weights $w/model.safetensors --no-tune --decode-batches 1 --decode-steps 8 \
        --prefill-tokens 512,2048 --out $OUT/r/e2e/${side}_${m}_$i.json 2>&1 | grep prefill
    done
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
