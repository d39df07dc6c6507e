// io/Files.h — what io's readers and writers share: errors that start with the file they are about, and
// writing a file through a temporary and a rename (a failure leaves nothing behind).
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

namespace minfer {

// "'dir/x.safetensors': <fmt with vals>".
template <typename... Ts> llvm::Error fileError(llvm::StringRef path, const char *fmt, Ts &&...vals) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "'" + path + "': " + llvm::formatv(fmt, std::forward<Ts>(vals)...).str());
}

// Writes `path` through a temporary file in the same directory and a rename; a missing directory is named.
llvm::Error writeAtomically(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace minfer
