// jit/AtomicFile.h — writing a file so that a reader sees the old file or the whole new one, never a part.
//
// The bytes go to a temporary in the same directory (a rename is atomic only within one file system), which
// is renamed over the path once complete; on any failure the temporary is removed, so nothing is left behind
// and an existing file keeps its contents. Every file minfer writes goes through here: minferc's outputs,
// bundles, tuning databases, kernel-cache entries, dumped kernel sources, and io's formats (safetensors,
// .npy), which serialise into the stream handed to the writer.
#pragma once

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace minfer {

// What a finished write survives.
enum class Durability {
  // A crash of the process: the rename alone leaves the old file or the new one, whole.
  Process,
  // A crash of the machine as well: the file is fsynced before the rename and its directory after. For the
  // kernel cache, whose entries later processes trust for as long as they exist.
  Machine,
};

// Writes `path` with what `write` puts into the stream. An error `write` returns is returned as it is, and
// nothing is written. Errors of the writing itself name the file: "'dir/x': cannot write file: <why>", and a
// missing directory says so: "'dir/x': cannot write file: directory 'dir' does not exist".
llvm::Error writeAtomically(llvm::StringRef path, llvm::function_ref<llvm::Error(llvm::raw_ostream &)> write,
                            Durability durability = Durability::Process);
// The same with the file's bytes at hand.
llvm::Error writeAtomically(llvm::StringRef path, llvm::StringRef bytes, Durability durability = Durability::Process);

} // namespace minfer
