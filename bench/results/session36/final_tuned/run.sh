# Final figures: each model's decode tuned in step (decode:1, decode:9-16), then this build's e2e bench and
# main's (before session 36) on the same weights and database, alternated twice.
export LD_LIBRARY_PATH=$PWD/build-carry/extra-libs
export MINFER_CACHE_DIR=/tmp/minfer-kernel-cache
R=$OUT/r; mkdir -p $R
for m in ${MODELS:-tinyllama-1.1b gpt2-124m llama-3.2-1b}; do
  w=/dev/shm/minfer-e2e-$m
  python3 bench/torch_e2e.py --model $m --weights-out $w --out /dev/null --weights-only > $R/w_$m.log 2>&1
  build-carry/tools/minferc autotune examples/$m.ir --buckets decode:1,decode:9-16 --in-step --weights $w/model.safetensors > $R/tune_$m.log 2>&1
  tail -2 $R/tune_$m.log
  for i in 0 1; do
    for side in new main; do
      bin=build-carry/bench/minfer_e2e_bench; [[ $side == main ]] && bin=build-carry/old/main/bench/minfer_e2e_bench
      $bin --model examples/$m.ir --weights $w/model.safetensors --decode-batches 1,16 --prefill-tokens 16 \
        --out $R/e2e_${m}_${side}_$i.json > $R/e2e_${m}_${side}_$i.log 2>&1
      grep -E "^decode B=(1|16):" $R/e2e_${m}_${side}_$i.log | sed "s/^/$m $side $i: /"
    done
  done
  rm -rf $w
done
cp $MINFER_CACHE_DIR/tuning/*.json $R/ 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
