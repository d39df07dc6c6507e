#!/usr/bin/env bash
# bench/carry.sh — a slim copy of a GPU build's binaries, to carry to the GPU machine under its 64 MiB limit
# (the tracked tree counts too: ~22 MB). A build directory holds ~15 MB of objects and static libraries that
# the GPU machine never reads; the copy keeps what bench/run_gpu.sh runs, laid out as a build directory:
#
#   bench/carry.sh [BUILD_DIR] [OUT_DIR] [NAME=E2E_BENCH ...]   # defaults build-gpu, build-carry
#
# OUT_DIR gets tests/minfer_gpu_tests, bench/minfer_e2e_bench, bench/minfer_kernel_bench, tools/minferc,
# runtime/libminfer.so* (bench/trace_decode.py loads it) and extra-libs/ (BUILD_DIR's, plus libminfer.so*:
# run_gpu.sh puts it on LD_LIBRARY_PATH, and the test binary needs it where the build's rpath does not
# reach). Each NAME=FILE puts an earlier revision's minfer_e2e_bench at OUT_DIR/old/NAME/bench/, for
# run_gpu.sh's ab step (AB_BASE=OUT_DIR/old/NAME/bench/minfer_e2e_bench), or, where FILE's name ends in
# kernel_bench, its minfer_kernel_bench there, for the kernel_ab step
# (KERNEL_AB_BASE=OUT_DIR/old/NAME/bench/minfer_kernel_bench). Then, on the GPU machine:
#   OUT=dir bench/run_gpu.sh build-carry tests,ab
# The GPU tests find tools/minferc beside their own directory when the build's path does not hold it.
set -euo pipefail
build="${1:-build-gpu}"
out="${2:-build-carry}"
shift $(($# < 2 ? $# : 2))
[[ -d "$build" ]] || { echo "carry.sh: no build directory '$build'" >&2; exit 1; }
rm -rf "$out"
mkdir -p "$out/tests" "$out/bench" "$out/tools" "$out/runtime" "$out/extra-libs"
copied=0
for f in tests/minfer_gpu_tests bench/minfer_e2e_bench bench/minfer_kernel_bench tools/minferc; do
  if [[ -x "$build/$f" ]]; then cp "$build/$f" "$out/$f"; copied=1; fi
done
((copied)) || { echo "carry.sh: '$build' holds none of the GPU binaries (build them first)" >&2; exit 1; }
if compgen -G "$build/runtime/libminfer.so*" > /dev/null; then
  cp -a "$build"/runtime/libminfer.so* "$out/runtime/"
  cp -a "$build"/runtime/libminfer.so* "$out/extra-libs/"
fi
[[ -d "$build/extra-libs" ]] && cp -a "$build/extra-libs/." "$out/extra-libs/"
for old in "$@"; do
  name="${old%%=*}" file="${old#*=}"
  [[ "$name" != "$old" && -x "$file" ]] || { echo "carry.sh: expected NAME=EXECUTABLE, got '$old'" >&2; exit 1; }
  mkdir -p "$out/old/$name/bench"
  if [[ "$file" == *kernel_bench ]]; then
    cp "$file" "$out/old/$name/bench/minfer_kernel_bench"
  else
    cp "$file" "$out/old/$name/bench/minfer_e2e_bench"
  fi
done
echo "carry.sh: $out, $(du -sh "$out" | cut -f1) (carry it with the tree; the limit is 64 MiB in all)"
