set -u
export LD_LIBRARY_PATH=$PWD/build-gpu/extra-libs
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
# NVRTC compile time per kernel (one process, -j 1, fresh cache)
for m in tinyllama-1.1b llama-2-7b; do
  c=$(mktemp -d)
  MINFER_CACHE_DIR=$c timeout 250 build-gpu/tools/minferc examples/$m.ir --target sm_90a -j 1 -o /tmp/$m.mfb --time-passes > $OUT/r/compile_$m.log 2>&1
  echo "$m rc=$?"; grep -c "compiled in" $OUT/r/compile_$m.log
done
export MINFER_CACHE_DIR=/tmp/minfer-kernel-cache
F='Shapes/GemmKernel.*n64_k64:Shapes/GemmKernel.*n321_k64:Shapes/GemmKernel.*n136_k96:Shapes/GemmKernel.*n321_k200:GemmKernelEpilogues.*'
build-gpu/tests/minfer_gpu_tests --gtest_filter="$F" > $OUT/r/warm.log 2>&1; echo warm rc=$?
for tool in memcheck racecheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report hazard"; [ $tool = memcheck ] && extra="--leak-check full"
  pids=""
  for i in 0 1 2 3 4 5 6 7; do
    GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 170 compute-sanitizer --tool $tool $extra --error-exitcode 3 --print-limit 20 build-gpu/tests/minfer_gpu_tests --gtest_filter="$F" > $OUT/r/san_${tool}_$i.log 2>&1 &
    pids="$pids $!"
  done
  for p in $pids; do wait $p; echo "$tool shard rc=$?"; done
  grep -h "ERROR SUMMARY\|RACECHECK SUMMARY\|PASSED\|FAILED" $OUT/r/san_${tool}_*.log | sort | uniq -c
done
cd $OUT && tar czf r.tgz r && rm -rf r
