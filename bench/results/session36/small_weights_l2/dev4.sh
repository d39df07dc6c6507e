set -x
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
mkdir -p $OUT/r
OUT=$OUT/r/ab AB_BASE=build-carry/old/head/bench/minfer_e2e_bench AB_RUNS="gpt2-124m:128" AB_REPEATS=3 AB_BATCHES=1,16 AB_PREFILL=16 timeout 150 bench/run_gpu.sh build-carry ab > $OUT/r/ab.log 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
