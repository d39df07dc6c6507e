#!/usr/bin/env bash
set -u
export MINFER_CACHE_DIR=/tmp/mc
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
python3 bench/torch_e2e.py --model tinyllama-1.1b --weights-out /dev/shm/w --out /dev/null --weights-only > $OUT/x/w.log 2>&1
IR=examples/tinyllama-1.1b.ir; W=/dev/shm/w/model.safetensors
$B/tools/minferc autotune $IR --buckets decode:9-16 --in-step --weights $W > $OUT/x/tune.log 2>&1
grep keeps $OUT/x/tune.log | tee -a $OUT/x/summary.txt
db=$(ls $MINFER_CACHE_DIR/tuning/*.json | head -1); cp $db $OUT/x/db_base.json
cat > /tmp/edit.py <<'PY'
import json, sys
base, out, spec = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(base))
keys = {"o": "gemv_bf16_n2048_k2048_epi_residual@decode:9-16", "d": "gemv_bf16_n2048_k5632_epi_residual@decode:9-16",
        "q": "gemv_bf16_n2560_k2048_epi_qkv_h32_kv4_d64_half_pro_rms_unit@decode:9-16",
        "g": "gemv_bf16_n11264_k2048_epi_gated_silu_pro_rms_unit@decode:9-16",
        "h": "gemv_bf16_n32000_k2048_epi_none_pro_rms_unit@decode:9-16"}
for part in spec.split("+"):
    if part == "base": continue
    k, tile = part.split("=")
    d["entries"][keys[k]]["tile"] = tile
json.dump(d, open(out, "w"), indent=1)
PY
variants="base o=m16_mma_w4 o=m16_mma_w8 o=m16_mma_w16 o=m16_r1_w8 o=m16_r2_w4 d=m16_mma_w8 d=m16_mma_w16 q=m16_mma_w8 q=m16_mma_w16 o=m16_mma_w8+d=m16_mma_w8"
for r in 1 2; do
  i=0
  for v in $variants; do
    i=$((i+1))
    python3 /tmp/edit.py $OUT/x/db_base.json $db "$v"
    $B/bench/minfer_e2e_bench --model $IR --weights $W --decode-batches 16 --prefill-tokens 16 --out $OUT/x/v${i}_r$r.json > $OUT/x/v${i}_r$r.log 2>&1
    ms=$(grep -o "decode B=16: [0-9.]* ms/step" $OUT/x/v${i}_r$r.log | head -1)
    [[ -n "$ms" ]] || ms="FAILED $(tail -2 $OUT/x/v${i}_r$r.log)"
    echo "r$r v$i $v $ms $(grep -iE "warn|ignor|invalid" $OUT/x/v${i}_r$r.log | head -1 | cut -c1-200)" | tee -a $OUT/x/summary.txt
  done
done
cp $OUT/x/db_base.json $db
