#!/usr/bin/env bash
# session 34, call 3: Llama-2-7B prefill: torch.compile, minfer untuned, then tuned (prefill buckets, in step)
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
M=llama-2-7b; W=/dev/shm/minfer-e2e-$M
python3 bench/torch_e2e.py --model $M --weights-out $W --out /dev/null --weights-only > $R/w.log 2>&1; ts "weights rc=$?"
timeout 330 python3 bench/torch_e2e.py --model $M --weights-out $W --decode-batches '' --prefill-tokens 512,2048 --out $R/torch_$M.json > $R/torch_$M.log 2>&1; ts "torch rc=$?"
tail -4 $R/torch_$M.log
timeout 60 $B/bench/minfer_e2e_bench --model examples/$M.ir --weights $W/model.safetensors --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --no-tune --out $R/e2e_untuned.json > $R/e2e_untuned.log 2>&1; ts "e2e untuned rc=$?"
grep -i "prefill" $R/e2e_untuned.log | tail -4
if [ $(el) -lt 380 ]; then
  timeout $(( 540 - $(el) - 40 )) $B/tools/minferc autotune examples/$M.ir --buckets prefill:1-512,prefill:513-2048 --in-step --weights $W/model.safetensors > $R/autotune.log 2>&1; ts "autotune rc=$?"
  tail -3 $R/autotune.log
  timeout 40 $B/bench/minfer_e2e_bench --model examples/$M.ir --weights $W/model.safetensors --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --out $R/e2e_tuned.json > $R/e2e_tuned.log 2>&1; ts "e2e tuned rc=$?"
  grep -i "prefill" $R/e2e_tuned.log | tail -4
fi
tar czf $OUT/r.tgz -C $OUT r && rm -rf $R
ts end
