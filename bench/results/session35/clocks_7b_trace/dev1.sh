#!/usr/bin/env bash
# session 35 call 1: GPU side of session 34's timing changes; the o/down epilogue's cost; 7B trace with clocks
set -u
mkdir -p $OUT/r
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs MINFER_CACHE_DIR=/tmp/mc
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $OUT/r/gpu.txt
# 1. tests whose GPU side session 34 changed (autotuner inputs, row squares)
timeout 200 build-carry/tests/minfer_gpu_tests --gtest_filter='Autotune*:WeightUpload*' > $OUT/r/tests.txt 2>&1; echo "tests rc $?" >> $OUT/r/tests.txt
tail -3 $OUT/r/tests.txt
# 2. the residual epilogues (o, down) with and without their epilogue, and the folded-norm variants, + torch
OUT=$OUT/r/k KERNEL_SUITE=gemm_fused KERNEL_FILTER='(n2048_k2048|n4096_k4096|n2048_k5632|n4096_k11008)_wgmma_(m128n256_s4|m128n128_s7_pp|m64n128_s8|m128n128_s7)(_epi_none|_epi_residual|_epi_residual_rowsq) |_pro_' \
  timeout 250 bench/run_gpu.sh build-carry kernels > $OUT/r/kernels.log 2>&1
tail -30 $OUT/r/k/summary.txt
# 3. 7B prefill 2048 untraced x10 and traced, clocks every 10 ms
OUT=$OUT/r/t E2E_MODELS=llama-2-7b E2E_TUNE=0 TRACE_REPEATS=10 timeout 280 bench/run_gpu.sh build-carry trace > $OUT/r/trace.log 2>&1
tail -40 $OUT/r/trace.log
cd $OUT && tar czf r.tgz r && rm -rf r
