// compiler/Target.cpp — parsing `--target`.
#include "compiler/Target.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

namespace minfer {

llvm::ArrayRef<llvm::StringRef> validTargets() {
  // Ampere (A100, A10/RTX 30), Ada (L4/L40, RTX 40), Hopper; sm_90a unlocks Hopper-only instructions.
  static const llvm::StringRef targets[] = {"sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};
  return targets;
}

llvm::Expected<Target> parseTarget(llvm::StringRef s) {
  if (!llvm::is_contained(validTargets(), s))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "unknown target '" + s + "'; expected one of " + llvm::join(validTargets(), ", "));
  Target t;
  t.name = s.str();
  llvm::StringRef digits = s.drop_front(3);
  t.archSpecific = digits.consume_back("a");
  t.major = digits[0] - '0';
  t.minor = digits[1] - '0';
  return t;
}

} // namespace minfer
