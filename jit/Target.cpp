// jit/Target.cpp — parsing `--target`.
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
