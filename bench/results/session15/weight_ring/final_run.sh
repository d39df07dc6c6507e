set -u
export LD_LIBRARY_PATH=$PWD/build-gpu/extra-libs MINFER_CACHE_DIR=/tmp/minfer-kernel-cache
mkdir -p $OUT/r
OUT=$OUT/r bench/run_gpu.sh build-gpu tests > $OUT/r/run_gpu_tests.log 2>&1; echo "gpu suite rc=$?"
grep -E "tests passed|tests failed|Failed|\*\*\*" $OUT/r/run_gpu_tests.log | head
m=tinyllama-1.1b; w=/dev/shm/w-$m
python3 bench/torch_e2e.py --model $m --weights-out $w --out /dev/null --weights-only > /dev/null 2>&1
for ring in 0 1; do
  a=""; [ $ring = 1 ] && a="--weight-ring"
  timeout 200 build-gpu/bench/minfer_e2e_bench --model examples/$m.ir --weights $w/model.safetensors $a \
    --out $OUT/r/e2e_${m}_ring$ring.json --no-tune --decode-batches 1,2 --prefill-tokens 16 > $OUT/r/e2e_${m}_ring$ring.log 2>&1; echo "ring $ring rc=$?"
  grep -E "launches|persistent" $OUT/r/e2e_${m}_ring$ring.log | head
done
F='Session.PersistentDecodeAgreesWithTheLaunchesAtEveryBatch'
for tool in memcheck racecheck synccheck; do
  extra=""; [ $tool = racecheck ] && extra="--racecheck-report hazard"
  timeout 300 compute-sanitizer --tool $tool $extra --error-exitcode 3 --print-limit 20 build-gpu/tests/minfer_gpu_tests --gtest_filter="$F" > $OUT/r/san_$tool.log 2>&1 &
done
wait
for tool in memcheck racecheck synccheck; do echo $tool; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/r/san_$tool.log; done
cd $OUT && tar czf r.tgz r && rm -rf r
