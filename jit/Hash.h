// jit/Hash.h — SHA-256, the one hash jit uses: kernel-cache keys and entry checksums, bundle checksums.
#pragma once

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <string>

namespace minfer {

// The 32-byte digest of `bytes`.
std::array<uint8_t, 32> sha256(llvm::StringRef bytes);
// The same digest as 64 lowercase hex digits.
std::string sha256Hex(llvm::StringRef bytes);

} // namespace minfer
