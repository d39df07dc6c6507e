// jit/AtomicFile.cpp — a temporary beside the file, then a rename (see AtomicFile.h).
#include "jit/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Path.h"

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

namespace minfer {
namespace {

llvm::Error cannotWrite(llvm::StringRef path, const llvm::Twine &why) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "'" + path + "': cannot write file: " + why);
}

} // namespace

llvm::Error writeAtomically(llvm::StringRef path, llvm::function_ref<llvm::Error(llvm::raw_ostream &)> write,
                            Durability durability) {
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  if (!dir.empty() && !llvm::sys::fs::is_directory(dir)) // creating the temporary would fail without saying why
    return cannotWrite(path, "directory '" + dir + "' does not exist");
  llvm::SmallString<256> tmp;
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::createUniqueFile(path + ".tmp-%%%%%%%%", fd, tmp))
    return cannotWrite(path, "cannot create a temporary beside it: " + ec.message());
  llvm::FileRemover removeTmp(tmp); // until the rename has succeeded

  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  llvm::Error written = write(os);
  std::error_code ec;
  if (!written && durability == Durability::Machine) {
    os.flush();
    if (!os.has_error() && ::fsync(fd) != 0) ec = std::error_code(errno, std::generic_category());
  }
  os.close();
  if (os.has_error()) {
    if (!ec) ec = os.error();
    os.clear_error(); // a stream destroyed with an error set aborts the process
  }
  if (written) return written;
  if (ec) return cannotWrite(path, ec.message());
  if (std::error_code rec = llvm::sys::fs::rename(tmp, path)) return cannotWrite(path, rec.message());
  removeTmp.releaseFile();

  if (durability == Durability::Machine) {
    // The rename itself, best effort: a crash before this loses the new file, never leaves a torn one.
    llvm::SmallString<256> dirName(dir.empty() ? llvm::StringRef(".") : dir);
    int dfd = ::open(dirName.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  return llvm::Error::success();
}

llvm::Error writeAtomically(llvm::StringRef path, llvm::StringRef bytes, Durability durability) {
  return writeAtomically(
      path,
      [&](llvm::raw_ostream &os) {
        os << bytes;
        return llvm::Error::success();
      },
      durability);
}

} // namespace minfer
