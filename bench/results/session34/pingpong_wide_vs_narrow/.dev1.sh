#!/usr/bin/env bash
# session 34, call 1: GemmKernel tests with the precompile (time), ping-pong qkv narrow/wide A/B x5, ncu on TinyLlama qkv 512
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
ts tests
timeout 280 $B/tests/minfer_gpu_tests --gtest_filter='Shapes/GemmKernel.*:GemmKernelEpilogues.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt
grep -E "FAILED|PASSED|rc=|precompil|ms\)$" $OUT/r/tests.txt | tail -14
ts tests done
KERNEL_AB_BASE=$B/old/narrow/bench/minfer_kernel_bench AB_REPEATS=5 KERNEL_SUITE=gemm_fused \
KERNEL_FILTER='wgmma_(m128n128_s7_pp_epi_qkv_h32_kv32_d128_half|m128n160_s6_pp_epi_qkv_h32_kv4_d64_half|m128n128_s7_epi_none) M=(512|2048)' \
  timeout 200 bench/run_gpu.sh $B kernel_ab > $OUT/r/kab.log 2>&1
ts kab done; tail -30 $OUT/r/kab.log
for k in qkv_h32_kv4_d64_half none; do
  [ $(( $(date +%s) - t0 )) -gt 480 ] && break
  timeout 60 ncu -k regex:gemmWgmma --launch-skip 3 --launch-count 1 --set full --import-source yes -o $OUT/r/ncu_$k \
    $B/bench/minfer_kernel_bench --suite gemm_fused --filter "n2560_k2048_wgmma_m128n80_s8_epi_$k M=512 " > $OUT/r/ncu_$k.log 2>&1
  ts "ncu $k rc=$?"
  ncu --import $OUT/r/ncu_$k.ncu-rep --page details > $OUT/r/ncu_$k.txt 2>&1
  ncu --import $OUT/r/ncu_$k.ncu-rep --page source --csv --print-source sass > $OUT/r/ncu_${k}_sass.csv 2>&1
  ts "ncu import rc=$?"
done
ts end
