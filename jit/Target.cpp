// jit/Target.cpp — parsing `--target`, and the per-arch limits.
#include "jit/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace minfer {

llvm::ArrayRef<llvm::StringRef> validTargets() {
  // Ampere (A100, A10/RTX 30, Orin), Ada (L4/L40, RTX 40), Hopper; sm_90a unlocks Hopper-only
  // instructions (wgmma, setmaxnreg). Blackwell as plain, forward-compatible targets: sm_100 (B200) and
  // sm_120 (RTX 50); NVRTC 12.8 and later accept them (nvrtcOptions says so when the loaded one does not).
  static const llvm::StringRef targets[] = {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"};
  return targets;
}

int Target::maxSharedBytesPerBlock() const {
  switch (smVersion()) {
  case 80: // A100
  case 87: // Orin
    return 163 * 1024;
  case 90:  // H100, H200
  case 100: // B200
    return 227 * 1024;
  default: // sm_86 (RTX 30, A10, A40), sm_89 (RTX 40, L4, L40), sm_120 (RTX 50)
    return 99 * 1024;
  }
}

std::string deviceTargetName(int major, int minor) {
  std::string sm = "sm_" + std::to_string(major * 10 + minor);
  return major == 9 && minor == 0 ? sm + "a" : sm;
}

int Target::nominalSmCount() const {
  switch (smVersion()) {
  case 80: return 108;  // A100
  case 86: return 84;   // RTX 3090 / A40
  case 87: return 16;   // Orin
  case 89: return 128;  // RTX 4090 (L40S: 142, L4: 58)
  case 90: return 132;  // H100 SXM / H200
  case 100: return 148; // B200
  case 120: return 170; // RTX 5090
  default: return 100;
  }
}

llvm::Expected<Target> parseTarget(llvm::StringRef s) {
  if (!llvm::is_contained(validTargets(), s))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unknown target '" + s + "'; expected one of " + llvm::join(validTargets(), ", "));
  Target t;
  t.name = s.str();
  llvm::StringRef digits = s.drop_front(3); // "90a", "100"
  t.archSpecific = digits.consume_back("a");
  unsigned sm = 0;
  digits.getAsInteger(10, sm); // cannot fail: s is one of validTargets()
  t.major = int(sm / 10);      // 100 -> 10.0, 89 -> 8.9
  t.minor = int(sm % 10);
  return t;
}

} // namespace minfer
