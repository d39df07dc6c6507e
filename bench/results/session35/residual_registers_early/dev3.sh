#!/usr/bin/env bash
# session 35 call 3: the residual's register loads at the prefetch slice (cooperative tiles): one row (BN 256)
# or both rows; each against the late L2 prefetch alone (8a7ea9f); e2e prefill against main
set -u
mkdir -p $OUT/r
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs MINFER_CACHE_DIR=/tmp/mc
F='(n2048_k2048|n4096_k4096|n2048_k5632|n4096_k11008)_wgmma_(m128n256_s4|m64n128_s8|m128n128_s7)(_epi_residual_rowsq|_epi_residual) '
OUT=$OUT/r/one_row KERNEL_SUITE=gemm_fused KERNEL_FILTER="$F" KERNEL_AB_BASE=build-carry/old/late/bench/minfer_kernel_bench AB_REPEATS=3 \
  timeout 150 bench/run_gpu.sh build-carry kernel_ab > $OUT/r/kab1.log 2>&1
cut -c1-150 $OUT/r/one_row/kernel_ab.txt | head -40
OUT=$OUT/r/both_rows KERNEL_SUITE=gemm_fused KERNEL_FILTER="$F" KERNEL_AB_BASE=build-carry/old/late/bench/minfer_kernel_bench AB_REPEATS=3 \
  timeout 150 bench/run_gpu.sh build-carry/old/both kernel_ab > $OUT/r/kab2.log 2>&1
cut -c1-150 $OUT/r/both_rows/kernel_ab.txt | head -40
OUT=$OUT/r/e2e AB_BASE=build-carry/old/main/bench/minfer_e2e_bench AB_RUNS="tinyllama-1.1b:128 llama-2-7b:128" AB_BATCHES=1 AB_PREFILL=512,2048 \
  timeout 170 bench/run_gpu.sh build-carry ab > $OUT/r/ab.log 2>&1
cat $OUT/r/e2e/ab.txt
timeout 110 build-carry/tests/minfer_gpu_tests --gtest_filter='FusedMatmul*:GemmKernelEpilogues*' > $OUT/r/tests_one_row.txt 2>&1; echo "tests rc $?" >> $OUT/r/tests_one_row.txt
tail -3 $OUT/r/tests_one_row.txt
cd $OUT && tar czf r.tgz r && rm -rf r
