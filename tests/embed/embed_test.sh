#!/bin/sh
# tests/embed/embed_test.sh — `cmake --install` minfer, build examples/embed against the installed package
# with find_package(minfer), and run both example programs (C++ and C API) on a golden fixture.
#   With a GPU: each must print the tokens Hugging Face transformers generated (greedy_ids of llama_gqa).
#   Without one: each must fail with exit code 1 and a message naming the missing CUDA driver.
# usage: embed_test.sh BUILD_DIR SOURCE_DIR WORK_DIR CMAKE_GENERATOR
set -eu
build=$1 src=$2 work=$3 generator=$4
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
cmake -S "$src/examples/embed" -B "$work/build" -G "$generator" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"

fixture=$src/tests/golden/fixtures/llama_gqa
prompt=449,229,25,320,261,451,196
expected=452,130,223,454,332,66,478,395 # HF greedy_ids (tests/golden/fixtures/llama_gqa/reference.safetensors)
for exe in minfer_embed minfer_embed_c; do
  if out=$("$work/build/$exe" "$fixture" "$prompt" 8 2> "$work/$exe.err"); then
    if [ "$out" != "$expected" ]; then
      echo "FAIL: $exe generated $out; transformers generated $expected"
      exit 1
    fi
    echo "$exe: generated the transformers tokens $out"
  else
    status=$?
    if ! grep -q "no CUDA driver" "$work/$exe.err" || [ "$status" -ne 1 ]; then
      echo "FAIL: $exe exited $status without the 'no CUDA driver' message:"
      cat "$work/$exe.err"
      exit 1
    fi
    if [ -e /dev/nvidiactl ]; then
      echo "FAIL: $exe reports no CUDA driver on a machine with an NVIDIA device:"
      cat "$work/$exe.err"
      exit 1
    fi
    echo "$exe: no GPU here, failed cleanly (exit 1): $(cat "$work/$exe.err")"
  fi
done
