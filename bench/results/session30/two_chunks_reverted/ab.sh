#!/usr/bin/env bash
# Session 30: short contexts as two chunks where the (sequence, kv head) pairs fill the SMs twice (7B at 16 rows).
set -u
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
for model in llama-2-7b tinyllama-1.1b; do
  export MINFER_CACHE_DIR=/tmp/mc_$model
  python3 bench/torch_e2e.py --model $model --weights-out /dev/shm/w_$model --out /dev/null --weights-only > $OUT/x/w_$model.log 2>&1
  IR=examples/$model.ir; W=/dev/shm/w_$model/model.safetensors
  $B/tools/minferc autotune $IR --buckets decode:9-16 --in-step --weights $W > $OUT/x/tune_$model.log 2>&1
  grep keeps $OUT/x/tune_$model.log >> $OUT/x/summary.txt
  for r in 1 2; do
    for which in old new; do
      bin=$B/bench/minfer_e2e_bench; [[ $which == old ]] && bin=$B/old/main/bench/minfer_e2e_bench
      $bin --model $IR --weights $W --decode-batches 16 --prefill-tokens 16 --out $OUT/x/e2e_${model}_${which}_r$r.json > $OUT/x/e2e.log 2>&1
      echo "$model $which r$r $(grep -o 'decode B=[0-9]*: [0-9.]* ms/step[^;]*;[^)]*' $OUT/x/e2e.log)" | tee -a $OUT/x/summary.txt
    done
  done
  rm -rf /dev/shm/w_$model
done
