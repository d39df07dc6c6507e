#!/usr/bin/env bash
# session 31, call 2: ncu of 7B 16-row attention (old/new/tw), then TinyLlama and Llama-3.2-1B A/B untuned
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
mkdir -p $OUT/r
t0=$(date +%s)
ts() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
exe() { case $1 in old) echo $B/old/main/bench/minfer_e2e_bench;; new) echo $B/bench/minfer_e2e_bench;; tw) echo $B/old/tw/bench/minfer_e2e_bench;; esac; }
python3 bench/torch_e2e.py --model llama-2-7b --weights-out /dev/shm/w7 --out /dev/null --weights-only > $OUT/r/w7.log 2>&1
ts ncu
for v in old new tw; do
  timeout 120 ncu --kernel-name regex:attention_decode --launch-skip 300 --launch-count 2 --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
    $(exe $v) --model examples/llama-2-7b.ir --weights /dev/shm/w7 --decode-batches 16 --prefill-tokens 16 --decode-steps 16 --out /dev/null > $OUT/r/ncu7_$v.txt 2>&1
  ts "$v $(grep -m2 'Duration' $OUT/r/ncu7_$v.txt | tr -s ' ' | tr '\n' ' ')"
done
rm -rf /dev/shm/w7
for m in tinyllama-1.1b llama-3.2-1b; do
  python3 bench/torch_e2e.py --model $m --weights-out /dev/shm/w_$m --out /dev/null --weights-only > $OUT/r/w_$m.log 2>&1
  for i in 1 2; do
    for v in old new tw; do
      [ $v = tw ] && continue
      $(exe $v) --model examples/$m.ir --weights /dev/shm/w_$m --decode-batches 1,16 --prefill-tokens 16 --out $OUT/r/e2e_${m}_${v}_$i.json > $OUT/r/e2e_${m}_${v}_$i.log 2>&1
      ts "$m $v $i: $(grep -o '"ms_per_step": [0-9.]*' $OUT/r/e2e_${m}_${v}_$i.json | tr '\n' ' ')"
    done
  done
  [ $(( $(date +%s) - t0 )) -gt 480 ] && break
done
ts done
cd $OUT && tar czf r.tgz r && rm -rf r
