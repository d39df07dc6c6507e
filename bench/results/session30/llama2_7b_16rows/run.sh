#!/usr/bin/env bash
set -u
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
model=llama-2-7b
python3 bench/torch_e2e.py --model $model --weights-out /dev/shm/w_$model --out /dev/null --weights-only > $OUT/x/w_$model.log 2>&1
IR=examples/$model.ir; W=/dev/shm/w_$model/model.safetensors
export MINFER_CACHE_DIR=/tmp/mc_7b
$B/tools/minferc autotune $IR --buckets decode:9-16 --in-step --weights $W > $OUT/x/tune_${model}.log 2>&1
grep keeps $OUT/x/tune_${model}.log | tee -a $OUT/x/summary.txt
for r in 1 2 3; do
  $B/bench/minfer_e2e_bench --model $IR --weights $W --decode-batches 16 --prefill-tokens 16 --out $OUT/x/e2e_${model}_r$r.json > $OUT/x/e2e_r$r.log 2>&1
  echo "$model r$r $(grep -o 'decode B=[0-9]*: [0-9.]* ms/step[^;]*;[^)]*' $OUT/x/e2e_r$r.log | tr '\n' ' ')" | tee -a $OUT/x/summary.txt
done
