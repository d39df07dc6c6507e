// io/Files.h — what io's readers and writers share: errors that start with the file they are about.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

namespace minfer {

// "'dir/x.safetensors': <fmt with vals>".
template <typename... Ts> llvm::Error fileError(llvm::StringRef path, const char *fmt, Ts &&...vals) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'" + path + "': " + llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

} // namespace minfer
