# scripts/deps.sh — sourced by setup.sh and test.sh: installs minfer's build dependencies from Debian's
# packages when any is missing (the CUDA toolkit is expected in /usr/local/cuda or $CUDA_HOME already).
minfer_packages=(cmake ninja-build g++ llvm-14-dev libgtest-dev zlib1g-dev python3 libsentencepiece-dev libpcre2-dev)

minfer_install_deps() {
  local missing=()
  for p in "${minfer_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "minfer: installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  fi
  local cuda="${CUDA_HOME:-/usr/local/cuda}"
  if [ ! -f "$cuda/include/nvrtc.h" ]; then
    echo "minfer: no CUDA toolkit at $cuda (looked for include/nvrtc.h); install it or set CUDA_HOME" >&2
    return 1
  fi
}

minfer_build() {
  local build="${MINFER_BUILD_DIR:-build}"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${MINFER_BUILD_TYPE:-Release}"
  cmake --build "$build"
}
