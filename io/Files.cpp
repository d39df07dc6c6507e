// io/Files.cpp — the atomic writer io's files share.
#include "io/Files.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"

namespace minfer {

llvm::Error writeAtomically(llvm::StringRef path, llvm::function_ref<void(llvm::raw_ostream &)> write) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (!dir.empty() && !llvm::sys::fs::is_directory(dir)) // LLVM's error would not say why
    return fileError(path, "cannot write file: directory '{0}' does not exist", dir);
  llvm::SmallString<256> model(path);
  model += ".tmp-%%%%%%%%";
  llvm::Error e = llvm::writeFileAtomically(model, path, [&](llvm::raw_ostream &os) {
    write(os);
    return llvm::Error::success();
  });
  if (e) return fileError(path, "cannot write file: {0}", llvm::toString(std::move(e)));
  return llvm::Error::success();
}

} // namespace minfer
