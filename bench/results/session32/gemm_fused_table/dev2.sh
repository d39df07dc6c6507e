#!/usr/bin/env bash
# session 32, call 2: the fused prefill GEMMs against cuBLAS (gemm_fused, every shape, both M), and 8192^3
set -u
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r/fused $OUT/r/big
OUT=$OUT/r/fused KERNEL_SUITE=gemm_fused timeout 420 bash bench/run_gpu.sh build-carry kernels > $OUT/r/fused/log.txt 2>&1
ts "fused rc=$?"
OUT=$OUT/r/big KERNEL_SUITE=gemm KERNEL_FILTER='M=8192' timeout 100 bash bench/run_gpu.sh build-carry kernels > $OUT/r/big/log.txt 2>&1
ts "big rc=$?"
tail -30 $OUT/r/big/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
