#!/usr/bin/env bash
# tests/structure/rooms.sh — checks that no room includes a header of a room above it (../shared/DESIGN.md,
# "Rooms"). The CMake libraries make a call across rooms a link error; this catches a header-only use too.
# Usage: rooms.sh SOURCE_DIR. Prints every offending line and exits 1 when there is one.
set -u
cd "$1" || exit 2
# room: the rooms (and include prefixes) it may use besides itself and LLVM.
declare -A allowed=(
  [ir]=""
  [io]="ir"
  [jit]=""
  [compiler]="ir io jit"
  [runtime]="ir io jit compiler minfer"
)
bad=0
for room in ir io jit compiler runtime; do
  ok="$room llvm ${allowed[$room]}"
  while IFS= read -r line; do
    file=${line%%:*}
    inc=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$line")
    if ! grep -qw -- "$inc" <<<"$ok"; then
      echo "$line  <- $room/ may use only: ${ok}"
      bad=1
    fi
  done < <(grep -rnE '#include "[^"]+/' "$room" --include='*.h' --include='*.cpp')
done
# templates/ are compiled by NVRTC: they include each other and CUDA's headers, nothing of the host side.
if grep -rnE '#include "[^"]*/' templates; then
  echo "templates/ include host-side headers (above)"
  bad=1
fi
[ $bad -eq 0 ] && echo "rooms: every include goes down the room table"
exit $bad
