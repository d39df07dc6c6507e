#!/usr/bin/env bash
# scripts/setup.sh — on a fresh Debian 12 machine with the CUDA toolkit: installs what is missing,
# builds minfer, and runs it on bundled models: compiles TinyLlama-1.1B's kernels for sm_89 into a bundle
# (no GPU needed), then imports and runs a tiny random-weight Llama checkpoint (grouped-query attention,
# llama3 rope scaling, from tests/golden/fixtures) through the reference interpreter. It ends by printing
# where minferc is and how to run it next (tests/lit/setup-next-steps.test runs that part).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
minfer_install_deps
minfer_build
build="${MINFER_BUILD_DIR:-build}"
model=tests/golden/fixtures/llama_gqa

echo "== minferc examples/tinyllama-1.1b.ir --target sm_89 -o $build/tinyllama-1.1b.mfb"
"$build/tools/minferc" examples/tinyllama-1.1b.ir --target sm_89 -o "$build/tinyllama-1.1b.mfb"
echo "== again: served from the kernel cache"
"$build/tools/minferc" examples/tinyllama-1.1b.ir --target sm_89 -o "$build/tinyllama-1.1b.mfb"

echo "== minferc import-hf $model"
"$build/tools/minferc" import-hf "$model" -o "$build/llama_gqa.ir"
head -n 12 "$build/llama_gqa.ir"
echo "   ... (full IR in $build/llama_gqa.ir)"
echo "== minferc run $model --prompt-ids 449,229,25,320,261,451,196 --max-new-tokens 8 --backend=reference"
"$build/tools/minferc" run "$model" --prompt-ids 449,229,25,320,261,451,196 --max-new-tokens 8 \
  --backend=reference --logits-out "$build/llama_gqa_logits.npy"
echo "   (Hugging Face transformers generates 452,130,223,454,332,66,478,395 for this prompt)"

bin="$(cd "$build/tools" && pwd)"
echo
echo "== Done. minferc is $bin/minferc. Next:"
echo "   export PATH=\"$bin:\$PATH\"    # or: cmake --install $build --prefix ~/.local (puts minferc in ~/.local/bin)"
echo "   minferc --help                            # every subcommand (minferc run --help: its options)"
echo "   minferc run $model --prompt-ids 449,229,25 --backend=reference   # on the CPU; with a GPU, leave out --backend"
echo "   minferc examples/llama-2-7b.ir --target sm_90 -o llama2.mfb --time-passes   # compile a model's kernels for a GPU"
