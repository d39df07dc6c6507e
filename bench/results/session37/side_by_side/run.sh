# Session 37: the side-by-side decode table (issue 12): launches, persistent, torch.compile, batches 1, 8, 16,
# context 128, each model's decode tuned in step (decode:1, decode:9-16; batch 8 on the default tiles).
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
export MINFER_CACHE_DIR=/tmp/minfer-kernel-cache
R=/tmp/r; mkdir -p $R
TEST_FILTER='Shapes/GemvKernel.*' OUT=$R/tests bench/run_gpu.sh build-carry tests > /dev/null 2>&1
tail -2 $R/tests/run_gpu.log
(cd /tmp && tar czf $OUT/tests.tgz r/tests)
for m in ${MODELS:-gpt2-124m tinyllama-1.1b llama-3.2-1b}; do
  w=/dev/shm/minfer-e2e-$m
  python3 bench/torch_e2e.py --model $m --weights-out $w --out $R/torch_e2e_$m.json --decode-batches 1,8,16 \
    --prefill-tokens 16 > $R/torch_$m.log 2>&1
  grep -i -E "decode|compile" $R/torch_$m.log | tail -4
  build-carry/tools/minferc autotune examples/$m.ir --buckets decode:1,decode:9-16 --in-step --weights $w/model.safetensors > $R/tune_$m.log 2>&1
  tail -1 $R/tune_$m.log
  build-carry/bench/minfer_e2e_bench --model examples/$m.ir --weights $w/model.safetensors --decode-batches 1,8,16 \
    --prefill-tokens 16 --out $R/e2e_$m.json > $R/e2e_$m.log 2>&1
  grep -E "^decode B=" $R/e2e_$m.log | sed "s/^/$m: /"
  rm -rf $w
  (cd /tmp && tar czf $OUT/side_by_side.tgz r)
done
cp $MINFER_CACHE_DIR/tuning/*.json $R/ 2>/dev/null
(cd /tmp && tar czf $OUT/side_by_side.tgz r)
