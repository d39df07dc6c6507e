// jit/Target.h — the GPU architectures minfer compiles for (`--target sm_89`).
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace minfer {

struct Target {
  std::string name; // "sm_90a"
  int major = 0, minor = 0;
  bool archSpecific = false; // the `a` suffix: wgmma and friends, not forward compatible

  int smVersion() const { return major * 10 + minor; } // 90
  // NVRTC's option for this target: --gpu-architecture=sm_90a
  std::string nvrtcArchOption() const { return "--gpu-architecture=" + name; }
};

// The targets minfer accepts, oldest first.
llvm::ArrayRef<llvm::StringRef> validTargets();
// Parses "sm_89"; anything else is an error listing the valid targets.
llvm::Expected<Target> parseTarget(llvm::StringRef);

} // namespace minfer
