#!/usr/bin/env bash
# session 31, call 4: final-code attention tests; stall reasons of 16-row attention (7B, TinyLlama)
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
ts tests
timeout 200 $B/tests/minfer_gpu_tests --gtest_filter='Heads/AttentionDecodeGpu.*' > $OUT/r/tests_attn.txt 2>&1; echo rc=$? >> $OUT/r/tests_attn.txt
tail -3 $OUT/r/tests_attn.txt
M='--metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__inst_executed.sum,smsp__cycles_active.avg,gpu__time_duration.sum,smsp__warps_active.avg.per_cycle_active,dram__throughput.avg.pct_of_peak_sustained_elapsed'
for m in tinyllama-1.1b llama-2-7b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  ts "ncu $m"
  timeout 150 ncu --kernel-name regex:attention_decode --launch-skip 300 --launch-count 1 $M \
    $B/bench/minfer_e2e_bench --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 16 --prefill-tokens 16 --decode-steps 16 --out /dev/null > $OUT/r/ncu_$m.txt 2>&1
  rm -rf /dev/shm/w_$m
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
