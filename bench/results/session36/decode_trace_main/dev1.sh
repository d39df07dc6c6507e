set -x
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
mkdir -p $OUT/r
OUT=$OUT/r/ab KERNEL_SUITE=gemm_fused KERNEL_AB_BASE=build-carry/old/main/bench/minfer_kernel_bench AB_REPEATS=3 \
  KERNEL_FILTER='_wgmma_m128n(80|96|128|144|160|176|192|224|256)_s[0-9]_epi_qkv' timeout 300 bench/run_gpu.sh build-carry kernel_ab > $OUT/r/ab.log 2>&1
OUT=$OUT/r/dt E2E_MODELS=gpt2-124m,tinyllama-1.1b timeout 200 bench/run_gpu.sh build-carry decode_trace > $OUT/r/dt.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
