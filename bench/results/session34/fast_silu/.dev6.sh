#!/usr/bin/env bash
# session 34, call 6: fast SiLU + random bench inputs — GPU tests; gated kernels fast vs accurate SiLU (random inputs);
# e2e prefill A/B against main (untuned), TinyLlama and Llama-2-7B
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
( timeout 250 $B/tests/minfer_gpu_tests --gtest_filter='FusedMatmul.*:GemmKernelEpilogues.*:Fixtures/EndToEnd.*:Autotune.*' > $OUT/r/tests.txt 2>&1; echo rc=$? >> $OUT/r/tests.txt ) 
ts tests; grep -E "FAILED|PASSED|rc=" $OUT/r/tests.txt | tail -6
mkdir -p $OUT/k1
KERNEL_AB_BASE=$B/old/randold/bench/minfer_kernel_bench AB_REPEATS=3 KERNEL_SUITE=gemm_fused \
KERNEL_FILTER='wgmma_(m128n176_s5_pp|m128n224_s5_c2|m128n256_s4|m128n128_s7_pp)_epi_(gated|none)' \
  OUT=$OUT/k1 timeout 200 bench/run_gpu.sh $B kernel_ab > $OUT/r/kab1.log 2>&1
ts kab1; grep -A40 "kernel A/B:" $OUT/r/kab1.log | cut -c1-230
mkdir -p $OUT/ab
AB_BASE=$B/old/main/bench/minfer_e2e_bench AB_RUNS="tinyllama-1.1b:128 llama-2-7b:128" AB_BATCHES=1 AB_PREFILL=512,2048 AB_REPEATS=2 \
  OUT=$OUT/ab timeout $(( 560 - $(date +%s) + t0 )) bench/run_gpu.sh $B ab > $OUT/r/ab.log 2>&1
ts ab; grep -A30 "ab_\|ratio\|median" $OUT/ab/ab.txt | head -30
cp $OUT/ab/ab.txt $OUT/k1/kernel_ab.txt $OUT/r/ 2>/dev/null
cd $OUT && tar czf all.tgz r k1 ab && rm -rf r k1 ab
