#!/usr/bin/env bash
# session 35 call 2: the residual's L2 prefetch late in the main loop (new) against main (base)
set -u
mkdir -p $OUT/r
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs MINFER_CACHE_DIR=/tmp/mc
F='(n2048_k2048|n4096_k4096|n2048_k5632|n4096_k11008)_wgmma_(m128n256_s4|m128n128_s7_pp|m64n128_s8|m128n128_s7)(_epi_residual_rowsq|_epi_residual) '
OUT=$OUT/r/ab KERNEL_SUITE=gemm_fused KERNEL_FILTER="$F" KERNEL_AB_BASE=build-carry/old/main/bench/minfer_kernel_bench AB_REPEATS=3 \
  timeout 300 bench/run_gpu.sh build-carry kernel_ab > $OUT/r/kab.log 2>&1
cat $OUT/r/ab/kernel_ab.txt | head -60
# ncu: TinyLlama's down at 2048 rows, 128x256, residual: DRAM and L2 of the epilogue's reads, new and base
for side in new base; do
  bin=build-carry/bench/minfer_kernel_bench; [[ $side == base ]] && bin=build-carry/old/main/bench/minfer_kernel_bench
  timeout 60 ncu --kernel-name regex:gemmWgmma --launch-count 1 --launch-skip 3 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,smsp__cycles_active.avg \
    $bin --suite gemm_fused --filter 'n2048_k5632_wgmma_m128n256_s4_epi_residual M=2048' > $OUT/r/ncu_$side.txt 2>&1
  grep -E "duration|bytes|hit_rate|sectors|cycles" $OUT/r/ncu_$side.txt
done
timeout 200 build-carry/tests/minfer_gpu_tests --gtest_filter='FusedMatmul*:GemmKernelEpilogues*' > $OUT/r/tests.txt 2>&1; echo "tests rc $?" >> $OUT/r/tests.txt
tail -3 $OUT/r/tests.txt
cd $OUT && tar czf r.tgz r && rm -rf r
