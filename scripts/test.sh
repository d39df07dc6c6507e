#!/usr/bin/env bash
# scripts/test.sh — installs what is missing, builds minfer, and runs every test (GoogleTest and lit,
# under CTest). GPU tests skip with a message where no GPU is present. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
minfer_install_deps
minfer_build
ctest --test-dir "${MINFER_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
# GPU tests skip themselves where there is no GPU; say so, with the reason, rather than leave it to the
# "did not run" list.
gpu_tests="${MINFER_BUILD_DIR:-build}/tests/minfer_gpu_tests"
if [ -x "$gpu_tests" ]; then
  why=$("$gpu_tests" --gtest_filter='DriverGpu*' 2>&1 | grep -m1 -o 'no GPU, skipping: .*' || true)
  [ -z "$why" ] || echo "minfer: the GPU tests (CTest label gpu) were skipped here — $why"
fi

# The sanitizer leg: the CPU tests, lit and the fuzz targets again, built with AddressSanitizer and
# UndefinedBehaviorSanitizer (any report is fatal). MINFER_SANITIZER_LEG=0 skips it.
if [ "${MINFER_SANITIZER_LEG:-1}" != 0 ]; then
  asan="${MINFER_ASAN_BUILD_DIR:-build-asan}"
  echo "minfer: sanitizer leg (ASan + UBSan) in $asan"
  # -O1: the sanitizers need no more, and the whole clean-clone CI run drops from 16.7 min (-O3) to 14.2.
  cmake -S . -B "$asan" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O1 -DCMAKE_CXX_FLAGS=-O1 \
    -DMINFER_SANITIZE=ON > /dev/null
  cmake --build "$asan" --target minfer_unit_tests minfer_fuzz minferc
  # Left out: the embedding example (it links the instrumented library into an uninstrumented program),
  # the GPU tests (not built here), the NVRTC compile sweeps (NVRTC is not instrumented; the first leg
  # ran them), and the 16-process cache stress test (90 s here; the first leg ran it, and its races are
  # between processes and files, which the sanitizers do not see).
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir "$asan" --output-on-failure -j "$(nproc)" -LE gpu \
      -E '^embed_example$|_NOT_BUILT|^MatmulNvrtc\.|EveryTemplate|^cache_stress$'
fi
