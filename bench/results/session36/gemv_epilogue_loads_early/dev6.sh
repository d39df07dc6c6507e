set -x
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
mkdir -p $OUT/r
OUT=$OUT/r/ab AB_BASE=build-carry/old/base/bench/minfer_e2e_bench AB_RUNS="tinyllama-1.1b:128 llama-3.2-1b:128" AB_REPEATS=3 AB_BATCHES=1,16 AB_PREFILL=16 timeout 300 bench/run_gpu.sh build-carry ab > $OUT/r/ab.log 2>&1
OUT=$OUT/r/t TEST_FILTER='*GemvKernel*:*EndToEnd*:*NormKernel*:EmbeddingKernel.*:Session.*' timeout 250 bench/run_gpu.sh build-carry tests > $OUT/r/t.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
