// jit/Target.h — the GPU architectures minfer compiles for (`--target sm_89`) and what code generation
// knows of each without a device: the one place for per-arch limits (the runtime reads the real device's
// through runtime/Driver.h DeviceInfo).
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

  // wgmma, TMA and setmaxnreg (templates/hopper.cuh): sm_90a only.
  bool hasWgmma() const { return archSpecific && major == 9; }
  // The dynamic shared memory one block may opt in to (227 KB on sm_90 and sm_100, 163 KB on sm_80/87,
  // 99 KB on sm_86/89/120).
  int maxSharedBytesPerBlock() const;
  // The shared memory of one SM, which its resident blocks share (each also pays 1 KB reserved).
  int sharedBytesPerSm() const { return maxSharedBytesPerBlock() + 1024; }
  // A typical SM count (H100/H200: 132, A100: 108, ...), for choices made without a device.
  int nominalSmCount() const;
};

// The targets minfer accepts, oldest first.
llvm::ArrayRef<llvm::StringRef> validTargets();
// The target minfer compiles for on a device of compute capability major.minor: "sm_89", and on Hopper the
// arch-specific "sm_90a" (wgmma and TMA exist only in sm_90a code, which runs on every 9.0 device).
std::string deviceTargetName(int major, int minor);
// Parses "sm_89"; anything else is an error listing the valid targets.
llvm::Expected<Target> parseTarget(llvm::StringRef);

} // namespace minfer
