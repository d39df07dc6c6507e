set -x
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
mkdir -p $OUT/r
OUT=$OUT/r/t TEST_FILTER='EmbeddingKernel.*:FusedMatmul*:GemmKernelEpilogues*:*EndToEnd*:Session*' timeout 330 bench/run_gpu.sh build-carry tests > $OUT/r/t.log 2>&1
OUT=$OUT/r/ab AB_BASE=build-carry/old/main/bench/minfer_e2e_bench AB_RUNS="gpt2-124m:128" AB_REPEATS=3 AB_BATCHES=1,16 AB_PREFILL=16 timeout 150 bench/run_gpu.sh build-carry ab > $OUT/r/ab.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
