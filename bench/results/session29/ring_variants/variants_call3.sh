#!/usr/bin/env bash
# Session 29 experiment: at 16 rows, decode gemv rings small enough to sit beside their neighbours.
set -u
export MINFER_CACHE_DIR=/tmp/mc
B=build-carry; export LD_LIBRARY_PATH=$PWD/$B/extra-libs
mkdir -p $OUT/x
python3 bench/torch_e2e.py --model tinyllama-1.1b --weights-out /dev/shm/w --out /dev/null --weights-only > $OUT/x/w.log 2>&1
IR=examples/tinyllama-1.1b.ir; W=/dev/shm/w/model.safetensors
$B/tools/minferc autotune $IR --buckets decode:1,decode:9-16 --in-step --weights $W > $OUT/x/tune.log 2>&1
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
keys1='"o1": "gemv_bf16_n2048_k2048_epi_residual@decode:1", "d1": "gemv_bf16_n2048_k5632_epi_residual@decode:1", "q1": "gemv_bf16_n2560_k2048_epi_qkv_h32_kv4_d64_half_pro_rms_unit@decode:1", "h1": "gemv_bf16_n32000_k2048_epi_none_pro_rms_unit@decode:1", "g1": "gemv_bf16_n11264_k2048_epi_gated_silu_pro_rms_unit@decode:1",'
sed -i "s/^keys = {/keys = {$keys1 /" /tmp/edit.py
variants="16:base 16:g=m16_wgmma_k128_s5_split1 16:g=m16_wgmma_k64_s10_split1 16:h=m16_wgmma_k128_s5_split1 16:h=m16_wgmma_k64_s5_split1 16:h=m16_wgmma_k64_s6_split1 16:d=m16_wgmma_k128_s10_split3 16:g=m16_wgmma_k128_s5_split1+d=m16_wgmma_k128_s10_split3 1:base 1:g1=m1_wgmma_k128_s5_split1 1:g1=m1_wgmma_k128_s6_split1 1:g1=m1_wgmma_k64_s12_split1 1:g1=m1_wgmma_k256_s3_split1 1:g1=m1_wgmma_k128_s4_split2 1:g1=m1_wgmma_k64_s8_split2 1:h1=m1_wgmma_k128_s3_split1 1:h1=m1_wgmma_k64_s5_split1 1:h1=m1_wgmma_k128_s5_split1 1:h1=m1_wgmma_k64_s6_split1"
for r in 1 2; do
  i=0
  for bv in $variants; do
    i=$((i+1)); b=${bv%%:*}; v=${bv#*:}
    python3 /tmp/edit.py $OUT/x/db_base.json $db "$v"
    $B/bench/minfer_e2e_bench --model $IR --weights $W --decode-batches $b --prefill-tokens 16 --out $OUT/x/v${i}_r$r.json > $OUT/x/v${i}_r$r.log 2>&1
    ms=$(grep -o "decode B=$b: [0-9.]* ms/step" $OUT/x/v${i}_r$r.log | head -1)
    [[ -n "$ms" ]] || ms="FAILED $(tail -2 $OUT/x/v${i}_r$r.log)"
    echo "r$r v$i $bv $ms" | tee -a $OUT/x/summary.txt
  done
done
cp $OUT/x/db_base.json $db
tar czf $OUT/r.tgz -C $OUT x; rm -f $OUT/x/v*
