#!/usr/bin/env bash
# bench/run_gpu.sh — the one script run on the GPU machine (Ubuntu 24.04, CUDA 13, PyTorch): the GPU tests,
# the kernel benchmarks, the PyTorch baseline on the same shapes, and a summary table.
#
#   OUT=/some/dir bench/run_gpu.sh [BUILD_DIR] [STEPS]   # BUILD_DIR defaults to build
#
# STEPS is a comma-separated subset of tests,sanitize,embed,load,e2e,trace,decode_trace,profile,ab,kernel_ab,
# kernels (default: all but trace, decode_trace, profile, ab, kernel_ab, sanitize and load). `ab` alternates this
# build's e2e bench with an earlier revision's ($AB_BASE) on the same weights; `kernel_ab` its kernel bench
# with an earlier one's ($KERNEL_AB_BASE) on the kernels $KERNEL_SUITE / $KERNEL_FILTER select. `trace` times each prefill launch in place
# (MINFER_PREFILL_TRACE, events between launches), after the prefill untraced, both with the clock's throttling
# reasons sampled (clocks_<untraced|trace>_<model>.txt); `decode_trace` what each launch adds to a decode step, or
# with TRACE_PREFILL=TOKENS to a prefill, as the stream runs them (bench/trace_decode.py).
# `load` measures weight loading and the time to a first token (load_<model>.json). `sanitize` runs the GPU
# tests under compute-sanitizer memcheck, racecheck and synccheck (sanitize_<tool>.log, the shards' output
# one after another). `e2e` runs, per model in
# $E2E_MODELS (default gpt2-124m,tinyllama-1.1b,llama-3.2-1b,llama-2-7b): bench/torch_e2e.py (writes seeded random weights
# to /dev/shm and times PyTorch eager and torch.compile on them), a cold and a warm `minferc run` of the
# model (time to first token), `minferc autotune` of the model for the benchmark's buckets (unless
# E2E_TUNE=0; with its in-step pass on the same weights unless E2E_IN_STEP=0), then minfer_e2e_bench on the same weights: fused and tuned, and (unless E2E_UNFUSED=0) unfused
# with the default tiles ($E2E_ARGS and $E2E_TORCH_ARGS: more arguments of the two, e.g. the decode batches;
# the e2e bench times the persistent decode kernel beside the launches where the plan has one); with E2E_COMPARE_BUILD=DIR, the e2e bench of another prebuilt build (an earlier
# revision) on the same weights in the same run, into compare_<model>.json.
#
# The build directory arrives prebuilt and is used as it is: nothing here builds. $OUT (set by the
# environment) receives these files:
#   run_gpu.log          everything this script printed
#   gpu_tests.xml        JUnit XML of the GPU tests (ctest -L gpu, or the test binary itself, see below)
#   kernel_bench.json    minfer_kernel_bench --out: one object per kernel result
#   torch_baseline.json  torch_baseline.py --out: PyTorch on the same shapes, its copy and cuBLAS ceilings
#   summary.txt          the table: kernel, GB/s, % of copy bandwidth, vs torch
#   best_per_shape.txt   the fastest kernel of each shape against torch (bench/best_per_shape.py)
#   e2e_<model>.json, e2e_unfused_<model>.json, torch_e2e_<model>.json, minferc_run_<model>.log
#                        the end-to-end results
# The kernel cache lives under /tmp ($MINFER_CACHE_DIR, kept between runs on a warm machine): the first
# step that compiles a kernel fills it and every later step reuses it, so kernels compile once a run.
# Every step runs even when an earlier one failed; the exit code is 1 when any failed.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-build}"
steps=",${2:-tests,embed,e2e,kernels},"
wants() { [[ "$steps" == *",$1,"* ]]; }
: "${OUT:?set OUT to the directory that receives the results}"
python="${PYTHON:-python3}"
mkdir -p "$OUT"

export MINFER_CACHE_DIR="${MINFER_CACHE_DIR:-/tmp/minfer-kernel-cache}"
# Shared libraries the build machine has and the GPU machine may not (libsentencepiece.so.0, for the
# tokenizers), copied next to the build by README's build steps.
[ -d "$build/extra-libs" ] && export LD_LIBRARY_PATH="$(cd "$build/extra-libs" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$MINFER_CACHE_DIR"
E2E_MODELS="${E2E_MODELS:-gpt2-124m,tinyllama-1.1b,llama-3.2-1b,llama-2-7b}"
shapes=/tmp/minfer_bench_shapes.json # input to the baseline only; kernel_bench.json holds the same shapes
rm -f "$shapes"
failed=()

step() { echo; echo "=== $* ($(date +%T))"; }

# Runs the command "${@:3}" as $1 gtest shards at once (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX), shard i's
# output in $2.i.log and its JUnit XML in $2.i.xml; shard_rcs gets their exit codes, in shard order.
run_shards() {
  local count=$1 prefix=$2 i
  shift 2
  local pids=()
  for ((i = 0; i < count; i++)); do
    GTEST_TOTAL_SHARDS=$count GTEST_SHARD_INDEX=$i GTEST_OUTPUT="xml:$prefix.$i.xml" "$@" > "$prefix.$i.log" 2>&1 &
    pids+=($!)
  done
  shard_rcs=()
  for ((i = 0; i < count; i++)); do
    wait "${pids[$i]}"
    shard_rcs+=($?)
  done
}

# Sets wdir to model $1's seeded random weights in /dev/shm (torch_e2e.py writes them, or keeps them when
# its seed.txt says they are already there).
weights_for() {
  wdir="/dev/shm/minfer-e2e-$1"
  "$python" "$here/torch_e2e.py" --model "$1" --weights-out "$wdir" --out /dev/null --weights-only \
    || failed+=("weights $1")
}

run_all() {
  step "machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || failed+=(nvidia-smi)
  echo "build dir: $build; kernel cache: $MINFER_CACHE_DIR ($(find "$MINFER_CACHE_DIR" -type f | wc -l) files)"
  local binaries=0
  for binary in tests/minfer_gpu_tests bench/minfer_kernel_bench bench/minfer_e2e_bench; do
    [[ -x "$build/$binary" ]] && binaries=1
  done
  if ((!binaries)); then
    echo "error: no test or benchmark binary in '$build': pass the prebuilt build directory as \$1"
    return 1
  fi

  if wants tests; then
  step "GPU tests"
  # ctest only works where the build directory was configured: CTest files hold absolute paths. Elsewhere
  # (a build directory carried to another path) run the test binary directly; its XML is JUnit too.
  configured="$(sed -n 's/^CMAKE_CACHEFILE_DIR:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null)"
  if command -v ctest >/dev/null && [[ -n "$configured" && "$(realpath "$configured")" == "$(realpath "$build")" ]]
  then
    # The soak samples the device's free memory, so it runs alone, after the rest.
    ctest --test-dir "$build" -L gpu -E '^Soak\.' -j "$(nproc)" --no-tests=error --output-on-failure --timeout 300 \
      --output-junit "$OUT/gpu_tests.xml" || failed+=("GPU tests")
    ctest --test-dir "$build" -R '^Soak\.' --no-tests=error --output-on-failure --timeout 300 -V \
      --output-junit "$OUT/soak.xml" | grep -E "soak|Passed|Failed|Failure" || failed+=("soak")
  elif [[ -x "$build/tests/minfer_gpu_tests" ]]; then
    # The test binary directly, as $TEST_SHARDS (default 8) gtest shards at once, as ctest -j would: the suite
    # is mostly NVRTC compiles, one core each (one process took over 330 s on a cold cache, session 25). The
    # shards share the kernel cache, whose writes are atomic renames. $TEST_FILTER (a gtest filter) picks
    # the tests; the soak samples the device's free memory, so it runs alone, after the rest.
    shards="${TEST_SHARDS:-8}"
    echo "(ctest unavailable or build dir moved from '${configured}': the test binary directly, $shards shards)"
    shard_dir="$(mktemp -d)"
    run_shards "$shards" "$shard_dir/gpu_tests" "$build/tests/minfer_gpu_tests" --gtest_filter="${TEST_FILTER:-*}:-Soak.*"
    for ((i = 0; i < shards; i++)); do echo "--- shard $i: exit ${shard_rcs[$i]}"; cat "$shard_dir/gpu_tests.$i.log"; done
    for rc in "${shard_rcs[@]}"; do ((rc)) && { failed+=("GPU tests"); break; }; done
    # One JUnit file of every shard's suites.
    "$python" - "$OUT/gpu_tests.xml" "$shard_dir"/gpu_tests.*.xml <<'PY' || failed+=("GPU tests' XML")
import os, sys
import xml.etree.ElementTree as ET
merged = ET.Element("testsuites", name="AllTests")
totals = dict(tests=0, failures=0, disabled=0, errors=0)
paths = [p for p in sys.argv[2:] if os.path.exists(p)]  # an unmatched glob stays a literal pattern
if not paths:
    sys.exit("no shard wrote its JUnit XML (did the test binary start? see the shards' output above)")
for path in paths:
    root = ET.parse(path).getroot()
    for key in totals:
        totals[key] += int(root.get(key, 0))
    merged.extend(root.findall("testsuite"))
for key, value in totals.items():
    merged.set(key, str(value))
ET.ElementTree(merged).write(sys.argv[1], encoding="UTF-8", xml_declaration=True)
print(f"{totals['tests']} tests, {totals['failures']} failed, in {len(paths)} shards: {sys.argv[1]}")
PY
    rm -rf "$shard_dir"
    if [[ -z "${TEST_FILTER:-}" ]]; then
      "$build/tests/minfer_gpu_tests" --gtest_filter='Soak.*' --gtest_output="xml:$OUT/soak.xml" || failed+=("soak")
    fi
  else
    echo "no GPU tests in $build"
    failed+=("GPU tests")
  fi
  fi

  if wants sanitize; then
    # The GPU suite under compute-sanitizer: memcheck (out-of-bounds and misaligned accesses, leaks of
    # device memory), racecheck (shared-memory hazards) and synccheck (illegal barriers), each a run of the
    # test binary with every kernel it launches checked. Left out: the soak (10,000 steps, minutes under a
    # sanitizer; it runs plain in `tests`) and the autotuner's timing sweeps (the tuned kernels' own tests
    # cover them). $SANITIZE_TOOLS picks the tools, $SANITIZE_FILTER the tests.
    # $SANITIZE_SHARDS (default 16) runs the suite as that many gtest shards at once, each its own process
    # under the tool: racecheck takes ~9 s per end-to-end test, too long for one process in a 10-minute call.
    # $SANITIZE_TIMEOUT (seconds, default none) stops each shard there: the log keeps the tests it finished
    # and the shard counts as failed (exit 124).
    shards="${SANITIZE_SHARDS:-16}"
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
      step "compute-sanitizer --tool $tool ($shards shards)"
      extra=()
      [[ "$tool" == memcheck ]] && extra=(--leak-check full)
      [[ "$tool" == racecheck ]] && extra=(--racecheck-report hazard)
      shard_dir="$(mktemp -d)"
      # --report-api-errors no: the error tests provoke failing API calls (a garbage module, an unknown kernel).
      run_shards "$shards" "$shard_dir/$tool" timeout "${SANITIZE_TIMEOUT:-0}" \
        "${SANITIZER:-compute-sanitizer}" --tool "$tool" "${extra[@]}" --report-api-errors no --error-exitcode 3 \
        --target-processes all \
        --print-limit 20 "$build/tests/minfer_gpu_tests" --gtest_filter="${SANITIZE_FILTER:--Soak.*:Autotune.*}"
      bad=0
      for ((i = 0; i < shards; i++)); do
        rc=${shard_rcs[$i]}
        # A shard the filter left empty exits non-zero (no kernel launched): not a failure.
        if [[ $rc -ne 0 ]] && ! grep -q "^\[  PASSED  \] 0 tests\." "$shard_dir/$tool.$i.log"; then
          bad=1
          echo "shard $i: exit $rc"
          tail -n 20 "$shard_dir/$tool.$i.log"
        fi
      done
      # One log per tool ($OUT brings back only a few files): the shards one after another.
      for ((i = 0; i < shards; i++)); do echo "##### shard $i of $shards"; cat "$shard_dir/$tool.$i.log"; done \
        > "$OUT/sanitize_$tool.log"
      rm -rf "$shard_dir"
      grep -E "^\[  (PASSED|FAILED)  \]" "$OUT/sanitize_$tool.log" | awk '{n[$2] += $4} END {for (k in n) print k, n[k], "tests"}'
      grep -E "ERROR SUMMARY|LEAK SUMMARY|RACECHECK SUMMARY" "$OUT/sanitize_$tool.log" | sort | uniq -c
      [[ $bad -eq 0 ]] || failed+=("compute-sanitizer $tool")
    done
  fi

  if wants embed; then
    step "examples/embed (built against the installed package, carried prebuilt in $build/embed)"
    for exe in minfer_embed minfer_embed_c; do
      if [[ -x "$build/embed/$exe" ]]; then
        got="$("$build/embed/$exe" "$here/../tests/golden/fixtures/llama_gqa" 449,229,25,320,261,451,196 8)"
        echo "$exe: $got"
        [[ "$got" == "452,130,223,454,332,66,478,395" ]] || failed+=("$exe")
        # Text in and out: the streamed text is the detokenized ids of the same prompt, up to EOS (320).
        tok="$here/../tests/fixtures/tokenizers/tiny_gpt2" gpt2="$here/../tests/golden/fixtures/gpt2"
        text="$("$build/embed/$exe" "$gpt2" --tokenizer "$tok" --text "hello world" 8)"
        ids="$("$build/embed/$exe" "$gpt2" 71,68,292,78,303,297 8 | sed 's/,320.*$//; s/^320.*$//')"
        whole=""
        [[ -z "$ids" ]] || whole="$("$build/tools/minferc" detokenize "$tok" --ids "$ids")"
        echo "$exe --text 'hello world': streamed $(printf '%q' "$text") (ids $ids)"
        [[ "$text" == "$whole" ]] || { echo "  but the ids detokenize to $(printf '%q' "$whole")"; failed+=("$exe --text"); }
      else
        echo "$build/embed/$exe not built"; failed+=("$exe")
      fi
    done
  fi

  if wants load; then
    # Weight loading: per model in $LOAD_MODELS (default tinyllama-1.1b,llama-2-7b), seeded random weights in
    # /dev/shm (memory, as a checkpoint in the page cache is), then minfer_e2e_bench --load-only (the GB/s the
    # weights reach the GPU at, against a pinned host-to-device copy measured in the same process) and a
    # warm-cache `minferc run --timings` (time to the first token).
    models="${LOAD_MODELS:-tinyllama-1.1b,llama-2-7b}"
    for model in ${models//,/ }; do
      step "weight loading: $model"
      weights_for "$model"
      ir="$here/../examples/$model.ir"
      "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" --load-only \
        --out "$OUT/load_$model.json" || failed+=("load bench $model")
      for run in warm-up timed; do # the first fills the kernel cache for minferc's own plan sizes
        start=$EPOCHREALTIME
        "$build/tools/minferc" run "$ir" --weights "$wdir/model.safetensors" --prompt-ids 1,2,3,4,5,6,7,8 \
          --max-new-tokens 1 --timings > "$OUT/first_token_$model.log" 2>&1 || failed+=("minferc run $model $run")
      done
      awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "minferc run to the first token, warm kernel cache: %.2f s\n", b - a }' \
        | tee -a "$OUT/first_token_$model.log"
      cat "$OUT/first_token_$model.log"
      [[ "${KEEP_WEIGHTS:-0}" == 1 ]] || rm -rf "$wdir"
    done
  fi

  if wants e2e; then
    for model in ${E2E_MODELS//,/ }; do
      step "end to end: $model"
      wdir="/dev/shm/minfer-e2e-$model"
      "$python" "$here/torch_e2e.py" --model "$model" --weights-out "$wdir" --out "$OUT/torch_e2e_$model.json" \
        ${E2E_TORCH_ARGS:-} || failed+=("torch e2e $model")
      if [[ -s "$wdir/model.safetensors" ]]; then
        ir="$here/../examples/$model.ir"
        for temp in cold warm; do
          [[ $temp == cold ]] && cache="/tmp/minfer-cold-cache-$model" && rm -rf "$cache"
          echo "-- minferc run, $temp kernel cache"
          start=$EPOCHREALTIME
          MINFER_CACHE_DIR="$cache" "$build/tools/minferc" run "$ir" \
            --weights "$wdir/model.safetensors" --prompt-ids 1,2,3,4,5,6,7,8 --max-new-tokens 32 \
            >> "$OUT/minferc_run_$model.log" 2>&1 || failed+=("minferc run $model $temp")
          awk -v a="$start" -v b="$EPOCHREALTIME" -v t="$temp" 'BEGIN { printf "minferc run wall time, %s cache: %.2f s\n", t, b - a }' \
            | tee -a "$OUT/minferc_run_$model.log"
          tail -4 "$OUT/minferc_run_$model.log"
        done
        if [[ "${E2E_TUNE:-1}" == 1 ]]; then
          echo "-- minferc autotune (the buckets the benchmark runs: decode B=1 and 16, prefill 512 and 2048)"
          in_step=()
          [[ "${E2E_IN_STEP:-1}" == 1 ]] && in_step=(--in-step --weights "$wdir/model.safetensors")
          "$build/tools/minferc" autotune "$ir" --buckets decode:1,decode:9-16,prefill:1-512,prefill:513-2048 \
            "${in_step[@]}" > "$OUT/autotune_$model.log" 2>&1 || failed+=("autotune $model")
          tail -3 "$OUT/autotune_$model.log"
        fi
        "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" \
          --out "$OUT/e2e_$model.json" ${E2E_ARGS:-} || failed+=("e2e bench $model")
        if [[ -n "${E2E_COMPARE_BUILD:-}" ]]; then
          echo "-- the same, fused and tuned, with the build in $E2E_COMPARE_BUILD (an earlier revision, side by side)"
          "$E2E_COMPARE_BUILD/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" \
            --out "$OUT/compare_$model.json" ${E2E_ARGS:-} || failed+=("e2e bench $model, compared build")
        fi
        if [[ "${E2E_NOPDL:-0}" == 1 ]]; then
          echo "-- the same, fused and tuned, without programmatic dependent launch (MINFER_NO_PDL=1)"
          MINFER_NO_PDL=1 "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" \
            --out "$OUT/nopdl_$model.json" ${E2E_ARGS:-} || failed+=("e2e bench $model no PDL")
        fi
        if [[ "${E2E_UNFUSED:-1}" == 1 ]]; then
          echo "-- the same, unfused (one kernel per IR op) with the default tiles"
          "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" --no-fuse --no-tune \
            --out "$OUT/e2e_unfused_$model.json" ${E2E_ARGS:-} || failed+=("e2e bench $model unfused")
        fi
      fi
      [[ "${KEEP_WEIGHTS:-0}" == 1 ]] || rm -rf "$wdir"
    done
    step "end to end, side by side"
    "$python" "$here/summarize_e2e.py" "$OUT" | tee "$OUT/summary_e2e.txt" || failed+=("e2e summary")
  fi

  if wants profile; then
    # Per-kernel GPU time of a few decode steps (ncu, kernel by kernel), to see where a step goes.
    for model in ${E2E_MODELS//,/ }; do
      step "profile: $model decode"
      weights_for "$model"
      for fuse in "" --no-fuse; do
        ncu --metrics gpu__time_duration.sum --print-summary per-kernel --csv ${PROFILE_NCU_ARGS:-} \
          "$build/tools/minferc" run "$here/../examples/$model.ir" --weights "$wdir/model.safetensors" \
          --prompt-ids 1,2,3,4 --max-new-tokens 4 --no-cuda-graph $fuse > "$OUT/profile_${model}${fuse}.csv" 2>&1 \
          || failed+=("profile $model $fuse")
        "$python" "$here/summarize_profile.py" "$OUT/profile_${model}${fuse}.csv" | tee "$OUT/profile_${model}${fuse}.txt"
      done
    done
  fi

  if wants trace; then
    # Where a prefill's time goes, kernel by kernel in place: per model in $E2E_MODELS, seeded random weights,
    # the prefill bucket tuned (unless E2E_TUNE=0), then minfer_e2e_bench at $TRACE_TOKENS (default 2048)
    # prompt tokens with MINFER_PREFILL_TRACE (an event before each launch; prefill_trace_<model>.tsv) and
    # MINFER_PERSISTENT_TRACE (the batch-1 persistent step; persistent_trace_<model>.tsv), after the same prefill
    # untraced (below), each with nvidia-smi sampling the SM clock, the power and the clock's event reasons.
    tokens="${TRACE_TOKENS:-2048}"
    for model in ${E2E_MODELS//,/ }; do
      step "trace: $model, prefill $tokens"
      weights_for "$model"
      ir="$here/../examples/$model.ir"
      if [[ "${E2E_TUNE:-1}" == 1 ]]; then
        bucket=prefill:513-2048
        [[ $tokens -le 512 ]] && bucket=prefill:1-512
        "$build/tools/minferc" autotune "$ir" --buckets "$bucket" > "$OUT/autotune_trace_$model.log" 2>&1 \
          || failed+=("autotune $model")
        tail -2 "$OUT/autotune_trace_$model.log"
      fi
      # The same prefill untraced first (the launches as the stream runs them, programmatic dependent launch
      # included), $TRACE_REPEATS times (default 10) back to back: whether a sustained prefill runs under the
      # power cap. Then the traced run. Both with the SM clock, the power and the clock's event reasons sampled
      # every 10 ms (clocks_untraced_<model>.csv, clocks_trace_<model>.csv; bench/summarize_clocks.py).
      for run in untraced trace; do
        nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
          --format=csv -lms 10 > "$OUT/clocks_${run}_$model.csv" 2>/dev/null &
        smi=$!
        if [[ $run == untraced ]]; then
          "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" --decode-batches 1 \
            --decode-steps 1 --prefill-tokens "$tokens" --repeats "${TRACE_REPEATS:-10}" \
            --out "$OUT/e2e_untraced_$model.json" ${E2E_ARGS:-} || failed+=("untraced $model")
        else
          MINFER_PREFILL_TRACE="$OUT/prefill_trace_$model.tsv" MINFER_PERSISTENT_TRACE="$OUT/persistent_trace_$model.tsv" \
            "$build/bench/minfer_e2e_bench" --model "$ir" --weights "$wdir/model.safetensors" --decode-batches 1 \
            --prefill-tokens "$tokens" --out "$OUT/e2e_trace_$model.json" ${E2E_ARGS:-} || failed+=("trace $model")
        fi
        kill $smi 2>/dev/null
        wait $smi 2>/dev/null
        echo "-- clocks, $run:"
        "$python" "$here/summarize_clocks.py" "$OUT/clocks_${run}_$model.csv" | tee "$OUT/clocks_${run}_$model.txt" \
          || failed+=("clocks summary $model $run")
      done
      "$python" "$here/summarize_trace.py" "$OUT/prefill_trace_$model.tsv" | tee "$OUT/prefill_trace_$model.txt" \
        || failed+=("trace summary $model")
      [[ "${KEEP_WEIGHTS:-0}" == 1 ]] || rm -rf "$wdir"
    done
  fi

  if wants decode_trace; then
    # Where a decode step's time goes in the stream (bench/trace_decode.py: CUPTI through torch.profiler, the
    # step replayed from its CUDA graph, kernels overlapping as they do under programmatic dependent launch):
    # per model in $E2E_MODELS, what each launch adds to the step, at context $TRACE_CONTEXT (default 128), with
    # the device's tuning database as it stands (decode_trace_<model>.json and .txt). With $TRACE_PREFILL
    # (tokens), a prefill of one sequence of that many tokens instead, its launches as programmatic dependents
    # (prefill_stream_<model>.json and .txt).
    for model in ${E2E_MODELS//,/ }; do
      step "decode trace: $model"
      weights_for "$model"
      name="decode_trace_$model"
      [[ -n "${TRACE_PREFILL:-}" ]] && name="prefill_stream_$model"
      "$python" "$here/trace_decode.py" --model "$model" --weights "$wdir/model.safetensors" --build "$build" \
        --context "${TRACE_CONTEXT:-128}" ${TRACE_PREFILL:+--prefill "$TRACE_PREFILL" --steps 6} \
        --out "$OUT/$name.json" 2>&1 | grep -v -E 'Warning:|_warn_once' | tee "$OUT/$name.txt"
      [[ ${PIPESTATUS[0]} == 0 ]] || failed+=("decode trace $model")
      [[ "${KEEP_WEIGHTS:-0}" == 1 ]] || rm -rf "$wdir"
    done
  fi

  if wants ab; then
    # A change judged against an earlier revision: this build's minfer_e2e_bench and $AB_BASE's (a prebuilt
    # minfer_e2e_bench binary carried beside it), alternated $AB_REPEATS times (default 2) on the same seeded
    # weights, untuned, for each MODEL:CONTEXT of $AB_RUNS (default tinyllama-1.1b:128) at decode batches
    # $AB_BATCHES (default 1,16) and prefill $AB_PREFILL (default 16; e.g. 512,2048). ab_<model>_c<context>_
    # <new|base>_<i>.json, and ab.txt: every run's step and prefill times and the ratio of the medians.
    if [[ -x "${AB_BASE:-}" ]]; then
      abs=()
      for run in ${AB_RUNS:-tinyllama-1.1b:128}; do
        model="${run%%:*}" context="${run##*:}"
        step "ab: $model, context $context"
        weights_for "$model"
        for ((i = 0; i < ${AB_REPEATS:-2}; i++)); do
          for side in new base; do
            bin="$build/bench/minfer_e2e_bench"
            [[ $side == base ]] && bin="$AB_BASE"
            json="$OUT/ab_${model}_c${context}_${side}_$i.json"
            "$bin" --model "$here/../examples/$model.ir" --weights "$wdir/model.safetensors" --no-tune \
              --decode-batches "${AB_BATCHES:-1,16}" --prefill-tokens "${AB_PREFILL:-16}" --context "$context" \
              --out "$json" > "$OUT/ab_${model}_c${context}_${side}_$i.log" 2>&1 || failed+=("ab $model $side $i")
            abs+=("$json")
          done
        done
      done
      "$python" - "${abs[@]}" <<'PY' | tee "$OUT/ab.txt" || failed+=("ab summary")
import json, os, re, statistics, sys
runs = {}  # (model, context, what) -> side -> [ms]
for path in sys.argv[1:]:
    if not os.path.exists(path):
        continue
    model, context, side = re.match(r"ab_(.+)_c(\d+)_(new|base)_\d+\.json", os.path.basename(path)).groups()
    d = json.load(open(path))
    for x in d.get("decode", []):
        runs.setdefault((model, context, f"decode {x['batch']} rows"), {}).setdefault(side, []).append(x["ms_per_step"])
    for x in d.get("prefill", []):
        if "ms" in x:
            runs.setdefault((model, context, f"prefill {x['tokens']}"), {}).setdefault(side, []).append(x["ms"])
print("model, context, what: new runs / base runs (ms), new / base of the medians")
for (model, context, what), sides in runs.items():
    new, base = sides.get("new", []), sides.get("base", [])
    ratio = statistics.median(new) / statistics.median(base) if new and base else float("nan")
    print(f"{model} c{context} {what}: {', '.join(f'{v:.4f}' for v in new)} / "
          f"{', '.join(f'{v:.4f}' for v in base)}  {ratio:.4f}")
PY
    else
      echo "ab: set AB_BASE to an earlier revision's minfer_e2e_bench"
      failed+=("ab")
    fi
  fi

  if wants kernel_ab; then
    # A kernel change judged against an earlier revision: this build's minfer_kernel_bench and
    # $KERNEL_AB_BASE's (an earlier revision's minfer_kernel_bench, carried beside it: bench/carry.sh), alternated
    # $AB_REPEATS times (default 3) over $KERNEL_SUITE and $KERNEL_FILTER, then PyTorch on the same shapes.
    # kernel_ab_<new|base>_<i>.json, kernel_ab_torch.json, and kernel_ab.txt (bench/summarize_kernel_ab.py):
    # every run's time, new/base of the best runs, the base runs' spread, and new against PyTorch.
    if [[ -x "${KERNEL_AB_BASE:-}" ]]; then
      step "kernel A/B against $KERNEL_AB_BASE"
      kabs=()
      kab_shapes=/tmp/minfer_kernel_ab_shapes.json
      rm -f "$kab_shapes"
      for ((i = 0; i < ${AB_REPEATS:-3}; i++)); do
        for side in new base; do
          bin="$build/bench/minfer_kernel_bench"
          [[ $side == base ]] && bin="$KERNEL_AB_BASE"
          json="$OUT/kernel_ab_${side}_$i.json"
          shapes_arg=()
          [[ $side == new && $i == 0 ]] && shapes_arg=(--shapes-out "$kab_shapes")
          "$bin" ${KERNEL_SUITE:+--suite "$KERNEL_SUITE"} ${KERNEL_FILTER:+--filter "$KERNEL_FILTER"} --out "$json" \
            "${shapes_arg[@]}" > "$OUT/kernel_ab_${side}_$i.log" 2>&1 || failed+=("kernel ab $side $i")
          kabs+=("$json")
        done
      done
      torch_arg=()
      if [[ -s "$kab_shapes" ]]; then
        "$python" "$here/torch_baseline.py" --shapes "$kab_shapes" --out "$OUT/kernel_ab_torch.json" \
          > "$OUT/kernel_ab_torch.log" 2>&1 || failed+=("kernel ab torch baseline")
        [[ -s "$OUT/kernel_ab_torch.json" ]] && torch_arg=(--torch "$OUT/kernel_ab_torch.json")
      fi
      "$python" "$here/summarize_kernel_ab.py" "${torch_arg[@]}" "${kabs[@]}" | tee "$OUT/kernel_ab.txt" \
        || failed+=("kernel ab summary")
    else
      echo "kernel_ab: set KERNEL_AB_BASE to an earlier revision's minfer_kernel_bench"
      failed+=("kernel_ab")
    fi
  fi

  if wants kernels; then
  step "kernel benchmarks"
  # $KERNEL_SUITE runs one suite (gemm, gemv, ...; minfer_kernel_bench --list), default all; $KERNEL_FILTER
  # (a regular expression on kernel name and shape) runs only the matmul and attention kernels it matches.
  "$build/bench/minfer_kernel_bench" ${KERNEL_SUITE:+--suite "$KERNEL_SUITE"} ${KERNEL_FILTER:+--filter "$KERNEL_FILTER"} --out "$OUT/kernel_bench.json" \
    --shapes-out "$shapes" || failed+=("kernel bench")

  step "PyTorch baseline"
  if [[ -s "$shapes" ]]; then
    "$python" "$here/torch_baseline.py" --shapes "$shapes" --out "$OUT/torch_baseline.json" \
      || failed+=("torch baseline")
  else
    echo "no shapes from the kernel bench: skipped"
  fi

  step "summary"
  if [[ -s "$OUT/kernel_bench.json" ]]; then
    baseline=()
    [[ -s "$OUT/torch_baseline.json" ]] && baseline=("$OUT/torch_baseline.json")
    "$python" "$here/summarize.py" "$OUT/kernel_bench.json" "${baseline[@]}" | tee "$OUT/summary.txt" \
      || failed+=(summary)
    # The fastest kernel of each shape against PyTorch (best_per_shape.txt): for the gemm_fused suite, the
    # tiles with their fused epilogues (not the bare variants, nor a folded norm's prologue or row squares), as
    # issue 11 counts them.
    torch_arg=()
    [[ -s "$OUT/torch_baseline.json" ]] && torch_arg=(--torch "$OUT/torch_baseline.json")
    exclude=()
    [[ "${KERNEL_SUITE:-}" == gemm_fused ]] && exclude=(--exclude '_epi_none|_pro_|_rowsq')
    "$python" "$here/best_per_shape.py" "$OUT/kernel_bench.json" "${torch_arg[@]}" "${exclude[@]}" \
      | tee "$OUT/best_per_shape.txt" || failed+=("best per shape")
  else
    echo "no kernel results"
  fi
  fi

  echo
  echo "kernel cache: $(find "$MINFER_CACHE_DIR" -type f | wc -l) files"
  if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}"
    return 1
  fi
  echo "all steps passed"
}

# Everything goes to the log as well; the pipeline ends only when tee has written all of it.
run_all 2>&1 | tee "$OUT/run_gpu.log"
exit "${PIPESTATUS[0]}"
