#!/usr/bin/env bash
# tests/fuzz/make_seeds.sh MINFERC TINY_IR OUTDIR — the seeds of the bundle and cache fuzz targets: OUTDIR/tiny.mfb
# (TINY_IR compiled for sm_89 with its own kernel cache) and OUTDIR/entry.mkc (the smallest entry of that cache).
set -euo pipefail
minferc="$1" ir="$2" out="$3"
rm -rf "$out"
mkdir -p "$out"
MINFER_CACHE_DIR="$out/cache" "$minferc" "$ir" --target sm_89 -o "$out/tiny.mfb"
entry="$(find "$out/cache/kernels" -name '*.mkc' -printf '%s %p\n' | sort -n | head -1 | cut -d' ' -f2)"
[ -n "$entry" ] || { echo "make_seeds.sh: minferc left no cache entry in $out/cache" >&2; exit 1; }
cp "$entry" "$out/entry.mkc"
echo "fuzz seeds: $(wc -c < "$out/tiny.mfb") B bundle, $(wc -c < "$out/entry.mkc") B cache entry"
