// jit/Hash.cpp — SHA-256 through LLVM Support.
#include "jit/Hash.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SHA256.h"

namespace minfer {

std::array<uint8_t, 32> sha256(llvm::StringRef bytes) { return llvm::SHA256::hash(llvm::arrayRefFromStringRef(bytes)); }

std::string sha256Hex(llvm::StringRef bytes) { return llvm::toHex(sha256(bytes), /*LowerCase=*/true); }

} // namespace minfer
