#!/usr/bin/env bash
# scripts/test.sh — installs what is missing, builds minfer, and runs every test (GoogleTest and lit,
# under CTest). GPU tests skip with a message where no GPU is present. .ci/run calls exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
minfer_install_deps
minfer_build
ctest --test-dir "${MINFER_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
