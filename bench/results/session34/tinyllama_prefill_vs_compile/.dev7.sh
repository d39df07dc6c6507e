#!/usr/bin/env bash
# session 34, call 7: GPU tests of the change (random synthetic weights, SiLU); the fused gemms' table against
# cuBLAS on random inputs; TinyLlama prefill tuned in step against torch.compile
set -u
B=build-carry
export LD_LIBRARY_PATH=$PWD/$B/extra-libs
export MINFER_CACHE_DIR=/tmp/mc
R=$OUT/r; mkdir -p $R
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
ts() { echo "[$(el)s] $*"; }
M=tinyllama-1.1b; W=/dev/shm/minfer-e2e-$M
python3 bench/torch_e2e.py --model $M --weights-out $W --out /dev/null --weights-only > $R/w.log 2>&1 &
timeout 200 $B/tests/minfer_gpu_tests --gtest_filter='WeightUpload.*:PointwiseKernel.*:Sweep/PointwiseKernel.*:Shapes/GemvKernel.*:Autotune.*:Session.*' > $R/tests.txt 2>&1; echo rc=$? >> $R/tests.txt
ts tests; grep -E "FAILED|PASSED|rc=" $R/tests.txt | tail -8
wait
mkdir -p $R/table
OUT=$R/table KERNEL_SUITE=gemm_fused KERNEL_FILTER='_epi_(qkv|residual|gated)[a-z0-9_]* M=' timeout 220 bench/run_gpu.sh $B kernels > $R/table/log.txt 2>&1
ts "table rc=$?"
timeout 150 python3 bench/torch_e2e.py --model $M --weights-out $W --decode-batches '' --prefill-tokens 512,2048 --out $R/torch_$M.json > $R/torch_$M.log 2>&1; ts "torch rc=$?"
tail -3 $R/torch_$M.log
left=$(( 570 - $(el) ))
if [ $left -gt 60 ]; then
  timeout $(( left - 30 )) $B/tools/minferc autotune examples/$M.ir --buckets prefill:1-512,prefill:513-2048 --in-step --weights $W/model.safetensors > $R/autotune.log 2>&1; ts "autotune rc=$?"
  tail -3 $R/autotune.log | cut -c1-250
  timeout 25 $B/bench/minfer_e2e_bench --model examples/$M.ir --weights $W/model.safetensors --decode-batches 1 --decode-steps 8 --prefill-tokens 512,2048 --out $R/e2e_tuned.json > $R/e2e_tuned.log 2>&1; ts "e2e tuned rc=$?"
  grep -i "prefill" $R/e2e_tuned.log | tail -3
fi
cd $OUT && tar czf r.tgz r && rm -rf r
ts end
