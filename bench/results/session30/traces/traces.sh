#!/usr/bin/env bash
# Session 30: the C API batch, then in-stream traces of the 16-row decode step (TinyLlama, Llama-2-7B).
set -u
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
MINFER_CACHE_DIR=/tmp/mc_tests timeout 150 $B/tests/minfer_gpu_tests --gtest_filter='Session.TheCApi*:Autotune.KeepsThe*:WeightUpload.*' > $OUT/x/gpu_tests.txt 2>&1
echo "tests rc=$?" >> $OUT/x/summary.txt; tail -3 $OUT/x/gpu_tests.txt >> $OUT/x/summary.txt; grep -E "^\[  FAILED|SKIPPED \]" $OUT/x/gpu_tests.txt | head >> $OUT/x/summary.txt
for model in tinyllama-1.1b llama-2-7b; do
  export MINFER_CACHE_DIR=/tmp/mc_$model
  python3 bench/torch_e2e.py --model $model --weights-out /dev/shm/w_$model --out /dev/null --weights-only > $OUT/x/w_$model.log 2>&1
  IR=examples/$model.ir; W=/dev/shm/w_$model/model.safetensors
  buckets=decode:1,decode:9-16; batches="1 16"
  [[ $model == llama-2-7b ]] && buckets=decode:9-16 && batches=16
  $B/tools/minferc autotune $IR --buckets $buckets --in-step --weights $W > $OUT/x/tune_$model.log 2>&1
  grep keeps $OUT/x/tune_$model.log >> $OUT/x/summary.txt
  for b in $batches; do
    python3 bench/trace_decode.py --model $model --weights $W --build $B --batch $b --out $OUT/x/trace_${model}_b$b.json > $OUT/x/trace_${model}_b$b.txt 2>&1
    cat $OUT/x/trace_${model}_b$b.txt >> $OUT/x/summary.txt
  done
  $B/bench/minfer_e2e_bench --model $IR --weights $W --decode-batches ${batches// /,} --prefill-tokens 16 --out $OUT/x/e2e_$model.json > $OUT/x/e2e_$model.log 2>&1
  echo "$model $(grep -o 'decode B=[0-9]*: [0-9.]* ms/step[^;]*' $OUT/x/e2e_$model.log | tr '\n' ' ')" >> $OUT/x/summary.txt
  rm -rf /dev/shm/w_$model
done
