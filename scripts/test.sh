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
