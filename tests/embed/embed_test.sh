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

# Text in and out: the 321-token GPT-2 tokenizer fixture with the gpt2 model fixture (the same vocabulary).
# The prompt ids must be HF's ("hello world" in tests/fixtures/tokenizers/tiny_gpt2/cases.json; GPT-2 adds no
# BOS) with or without a GPU; with one, the streamed text must be what `minferc detokenize` gives for the ids
# the same prompt generates, up to the tokenizer's EOS (320).
gfix=$src/tests/golden/fixtures/gpt2
tokdir=$src/tests/fixtures/tokenizers/tiny_gpt2
want_ids=71,68,292,78,303,297
for exe in minfer_embed minfer_embed_c; do
  if text=$("$work/build/$exe" "$gfix" --tokenizer "$tokdir" --text "hello world" 8 2> "$work/$exe.text.err"); then
    ids=$("$work/build/$exe" "$gfix" "$want_ids" 8 2> /dev/null | sed 's/,320.*$//; s/^320.*$//')
    whole=""
    [ -z "$ids" ] || whole=$("$build/tools/minferc" detokenize "$tokdir" --ids "$ids")
    if [ "$text" != "$whole" ]; then
      echo "FAIL: $exe streamed '$text'; the ids $ids detokenize to '$whole'"
      exit 1
    fi
    echo "$exe: streamed the text of its tokens ($ids)"
  elif ! grep -q "no CUDA driver" "$work/$exe.text.err"; then
    echo "FAIL: $exe --text failed:"
    cat "$work/$exe.text.err"
    exit 1
  fi
  if ! grep -q "prompt ids $want_ids\$" "$work/$exe.text.err"; then
    echo "FAIL: $exe did not tokenize 'hello world' as HF does ($want_ids):"
    cat "$work/$exe.text.err"
    exit 1
  fi
  echo "$exe: tokenized the prompt as HF does ($want_ids)"
done
