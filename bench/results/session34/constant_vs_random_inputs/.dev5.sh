#!/usr/bin/env bash
# session 34, call 5: the kernel bench on random inputs (new) against constant 0x3C inputs (base), cuBLAS on randn
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
KERNEL_AB_BASE=$B/old/const/bench/minfer_kernel_bench AB_REPEATS=3 KERNEL_SUITE=gemm_fused \
KERNEL_FILTER='wgmma_(m128n80_s8_epi_qkv|m64n128_s8_epi_residual|m128n176_s5_pp_epi_(gated|residual)|m128n160_s6_pp_epi_qkv|m128n128_s7_pp_epi_(qkv|residual)|m128n224_s5_c2_epi_gated|m128n256_s4_epi_[a-z])' \
  timeout 400 bench/run_gpu.sh $B kernel_ab > $OUT/r/kab.log 2>&1
ts kab; grep -A80 "kernel A/B:" $OUT/r/kab.log | cut -c1-230
cp $OUT/kernel_ab* $OUT/r/ 2>/dev/null; rm -f $OUT/kernel_ab*
timeout 120 $B/tests/minfer_gpu_tests --gtest_filter='Autotune.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=" $OUT/r/tests.txt | tail -5
ts end
cd $OUT && tar czf r.tgz r && rm -rf r run_gpu.log
