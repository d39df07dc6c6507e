#!/usr/bin/env bash
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
KERNEL_AB_BASE=$B/old/narrow/bench/minfer_kernel_bench AB_REPEATS=5 KERNEL_SUITE=gemm_fused \
KERNEL_FILTER='wgmma_(m128n128_s7_pp_epi_qkv_h32_kv32_d128_half|m128n160_s6_pp_epi_qkv_h32_kv4_d64_half|m128n128_s7_epi_none) M=(512|2048)' \
  timeout 300 bench/run_gpu.sh $B kernel_ab > $OUT/r/kab.log 2>&1
tail -40 $OUT/r/kab.log
