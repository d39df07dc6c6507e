#!/usr/bin/env bash
# Session 29: the autotuner with the wgmma gemvs' step neighbours (new) against main's (old), decode buckets.
set -u
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
for model in ${MODELS:-tinyllama-1.1b llama-3.2-1b}; do
  python3 bench/torch_e2e.py --model $model --weights-out /dev/shm/w_$model --out /dev/null --weights-only > $OUT/x/w_$model.log 2>&1
  IR=examples/$model.ir; W=/dev/shm/w_$model/model.safetensors
  for which in old new; do
    export MINFER_CACHE_DIR=/tmp/mc_$which; rm -rf $MINFER_CACHE_DIR/tuning
    bin=$B/tools/minferc; [[ $which == old ]] && bin=$B/old/main/minferc
    start=$EPOCHREALTIME
    $bin autotune $IR --buckets decode:1,decode:9-16 --in-step --weights $W > $OUT/x/tune_${model}_$which.log 2>&1
    awk -v a="$start" -v b="$EPOCHREALTIME" -v w=$which -v m=$model 'BEGIN { printf "%s %s autotune %.1f s\n", m, w, b - a }' | tee -a $OUT/x/summary.txt
    grep keeps $OUT/x/tune_${model}_$which.log | tee -a $OUT/x/summary.txt
  done
  for r in 1 2; do
    for which in old new; do
      export MINFER_CACHE_DIR=/tmp/mc_$which
      $B/bench/minfer_e2e_bench --model $IR --weights $W --decode-batches 1,16 --prefill-tokens 16 --out $OUT/x/e2e_${model}_${which}_r$r.json > $OUT/x/e2e_${model}_${which}_r$r.log 2>&1
      echo "$model $which r$r $(grep -o 'decode B=[0-9]*: [0-9.]* ms/step[^;]*' $OUT/x/e2e_${model}_${which}_r$r.log | tr '\n' ' ')" | tee -a $OUT/x/summary.txt
    done
  done
  rm -rf /dev/shm/w_$model
done
[[ -n "${NOTAR:-}" ]] || tar czf $OUT/r.tgz -C $OUT x; rm -f $OUT/x/e2e*.log
