#!/usr/bin/env bash
# tests/stress/cache_stress.sh MINFERC MODEL_IR WORKDIR [PROCESSES] [ROUNDS]
#
# Many processes compiling one model into one kernel cache at once. Each round empties the cache, then
# starts PROCESSES (default 16) `minferc MODEL --target sm_89 -o bundle` and one `minferc cache verify`
# together, so they race to compile, lock, publish and read the same keys while the verifier reads
# entries as they appear. Every process must succeed, every bundle must be byte-identical (within the
# round and across rounds), and `cache verify` afterwards must find every entry good. Exit 1 on the first
# failure, with what failed.
set -uo pipefail
minferc="$1" model="$2" work="$3" procs="${4:-16}" rounds="${5:-10}"
rm -rf "$work"
mkdir -p "$work"
export MINFER_CACHE_DIR="$work/cache"
fail() { echo "cache_stress: $*" >&2; exit 1; }

reference=""
for ((r = 1; r <= rounds; ++r)); do
  "$minferc" cache clear > /dev/null || fail "round $r: cache clear failed"
  pids=()
  for ((i = 1; i <= procs; ++i)); do
    "$minferc" "$model" --target sm_89 -o "$work/r${r}_p${i}.mfb" > "$work/r${r}_p${i}.log" 2>&1 &
    pids+=($!)
  done
  "$minferc" cache verify > "$work/r${r}_verify.log" 2>&1 &
  verifier=$!
  for ((i = 1; i <= procs; ++i)); do
    wait "${pids[$((i - 1))]}" || fail "round $r: process $i failed: $(cat "$work/r${r}_p${i}.log")"
  done
  wait "$verifier" || fail "round $r: the concurrent cache verify failed: $(cat "$work/r${r}_verify.log")"
  [ -n "$reference" ] || reference="$work/r1_p1.mfb"
  for ((i = 1; i <= procs; ++i)); do
    cmp -s "$reference" "$work/r${r}_p${i}.mfb" || fail "round $r: process $i wrote a bundle that differs from $reference"
  done
  verify="$("$minferc" cache verify 2>&1)" || fail "round $r: cache verify afterwards failed: $verify"
  # Every entry good: 'N good' with nothing bad.
  grep -Eq '(^|[^0-9])0 bad|no bad' <<< "$verify" || fail "round $r: cache verify afterwards: $verify"
  rm -f "$work"/r"${r}"_p*.mfb.tmp* 2> /dev/null
  [ "$r" -gt 1 ] && rm -f "$work"/r"${r}"_p*.mfb # keep round 1's as the reference
done
leftovers="$(find "$MINFER_CACHE_DIR" -name '*.tmp*' | head -3)"
[ -z "$leftovers" ] || fail "temporary files left in the cache: $leftovers"
echo "cache_stress: $rounds rounds of $procs processes compiling $(basename "$model") into one cache: all succeeded, identical bundles, verify clean"
