#!/usr/bin/env bash
# session 35 call 5: the fused gemm table (every gemm_fused tile with its epilogue, torch.matmul on the shapes)
set -u
mkdir -p $OUT/r
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs MINFER_CACHE_DIR=/tmp/mc
OUT=$OUT/r/table KERNEL_SUITE=gemm_fused KERNEL_FILTER='_epi_(qkv|residual|gated)' timeout 290 bench/run_gpu.sh build-carry kernels > $OUT/r/table.log 2>&1
echo "rc $?"; grep -i "warning" $OUT/r/table.log | head -5
cat $OUT/r/table/best_per_shape.txt
cd $OUT && tar czf r.tgz r && rm -rf r
