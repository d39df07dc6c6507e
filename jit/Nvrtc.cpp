// jit/Nvrtc.cpp — the NVRTC driver: generated CUDA C++ in, cubin + PTX + lowered entry name out.
//
// NVRTC needs no GPU and no driver, so this runs wherever minferc does. A source's own headers (the kernel
// templates, embedded in the binary) are handed to NVRTC from memory; CUDA's own headers are
// found on disk (cudaIncludeDir()). A failed compile is an llvm::Error carrying the kernel's name, NVRTC's
// whole log and the path where the source was dumped, so the user can rerun it by hand.
#include "jit/Nvrtc.h"

#include "jit/AtomicFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

#include <nvrtc.h>

#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <mutex>
#include <shared_mutex>
#include <unistd.h>

namespace minfer {
namespace {

llvm::Error nvrtcError(llvm::StringRef call, nvrtcResult r, llvm::StringRef kernel) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), "%s failed for kernel '%s': %s",
                                 call.str().c_str(), kernel.str().c_str(), nvrtcGetErrorString(r));
}

// Owns one nvrtcProgram, so every early return destroys it.
class Program {
public:
  Program() = default;
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;
  ~Program() {
    if (prog_) nvrtcDestroyProgram(&prog_);
  }
  nvrtcProgram *out() { return &prog_; }
  nvrtcProgram get() const { return prog_; }

private:
  nvrtcProgram prog_ = nullptr;
};

std::string programLog(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size == 0) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(prog, log.data()) != NVRTC_SUCCESS) return "";
  // The size counts the terminating NUL; trailing newlines only pad messages.
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

// A file name from a kernel name: spec names are URI-like already, but never let one escape the directory.
std::string fileStem(llvm::StringRef name) {
  std::string s;
  for (char c : name) s += (llvm::isAlnum(c) || c == '_' || c == '-' || c == '.') ? c : '_';
  if (s.empty() || s[0] == '.') s.insert(s.begin(), 'k');
  return s;
}

// Writes the source to <dir>/<name>.cu, atomically (several processes may fail on the same kernel at once).
// Returns the path, or an error saying why it could not be written.
llvm::Expected<std::string> dumpSource(const KernelSource &src, const CompileOptions &opts) {
  llvm::SmallString<256> dir;
  if (!opts.dumpDir.empty()) dir = opts.dumpDir;
  else llvm::sys::path::system_temp_directory(/*ErasedOnReboot=*/true, dir);
  if (std::error_code ec = llvm::sys::fs::create_directories(dir))
    return llvm::createStringError(ec, "cannot create dump directory %s: %s", dir.c_str(), ec.message().c_str());
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, fileStem(src.name) + ".cu");
  if (llvm::Error e = writeAtomically(path, src.text)) return e;
  return std::string(path);
}

bool hasCudaHeaders(llvm::StringRef dir) {
  llvm::SmallString<256> p(dir);
  llvm::sys::path::append(p, "cuda_bf16.h");
  return llvm::sys::fs::exists(p);
}

std::atomic<uint64_t> compileCount{0};

// Shared while a thread is inside NVRTC, exclusive while forkOutsideNvrtc forks.
std::shared_mutex forkGuard;
std::atomic<bool> inForkedChild{false};

// The SMs this NVRTC can generate code for (e.g. 75, 80, ..., 120), as it reports them.
std::vector<int> supportedArchs() {
  int n = 0;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return {};
  std::vector<int> archs(n);
  if (nvrtcGetSupportedArchs(archs.data()) != NVRTC_SUCCESS) return {};
  return archs;
}

} // namespace

pid_t forkOutsideNvrtc() {
  if (inForkedChild) return ::fork(); // the guard's copy here is held by a thread that does not exist
  std::unique_lock<std::shared_mutex> noCompiles(forkGuard);
  pid_t pid = ::fork();
  if (pid == 0) {
    // The child's copy of the guard is write-locked on behalf of the parent's thread; glibc cannot unlock it
    // from another thread id, so the child stops using it (it has one thread; nothing else can fork).
    inForkedChild = true;
    noCompiles.release();
  }
  return pid;
}

uint64_t nvrtcCompileCount() { return compileCount.load(); }

std::string nvrtcVersion() {
  int major = 0, minor = 0;
  if (::nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

llvm::Expected<std::string> findCudaIncludeDir(llvm::ArrayRef<IncludeCandidate> candidates) {
  std::vector<std::string> looked;
  for (const IncludeCandidate &c : candidates) {
    std::string dir = c.dir;
    llvm::SmallString<256> real;
    if (!llvm::sys::fs::real_path(dir, real)) dir = std::string(real); // resolve ../ and links for messages
    if (hasCudaHeaders(dir)) return dir;
    looked.push_back(dir + " (" + c.why + ")");
  }
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "cannot find CUDA's headers (cuda_bf16.h); set $CUDA_HOME to the CUDA toolkit. "
                                 "Looked in: %s",
                                 looked.empty() ? "nowhere (no $CUDA_HOME, no build-time toolkit, no libnvrtc path)"
                                                : llvm::join(looked, "; ").c_str());
}

llvm::Expected<std::string> cudaIncludeDir() {
  std::vector<IncludeCandidate> candidates;
  if (auto home = llvm::sys::Process::GetEnv("CUDA_HOME"); home && !home->empty()) {
    llvm::SmallString<256> p(*home);
    llvm::sys::path::append(p, "include");
    candidates.push_back({std::string(p), "$CUDA_HOME/include"});
  }
#ifdef MINFER_CUDA_INCLUDE_DIR
  // CMake's CUDAToolkit_INCLUDE_DIRS; a list when the toolkit splits its headers (';'-separated).
  llvm::SmallVector<llvm::StringRef, 2> built;
  llvm::StringRef(MINFER_CUDA_INCLUDE_DIR).split(built, ';', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef d : built) candidates.push_back({d.str(), "the toolkit minfer was built with"});
#endif
  // The toolkit that supplied the libnvrtc we loaded: <root>/lib64/libnvrtc.so -> <root>/include.
  Dl_info info;
  nvrtcResult (*anchor)(int *, int *) = ::nvrtcVersion;
  if (dladdr(reinterpret_cast<void *>(anchor), &info) && info.dli_fname) {
    llvm::SmallString<256> lib;
    if (llvm::sys::fs::real_path(info.dli_fname, lib)) lib = info.dli_fname;
    llvm::SmallString<256> p = llvm::sys::path::parent_path(llvm::sys::path::parent_path(lib));
    llvm::sys::path::append(p, "include");
    candidates.push_back({std::string(p), ("next to " + lib).str()});
  }
  return findCudaIncludeDir(candidates);
}

llvm::Expected<std::vector<std::string>> nvrtcOptions(const Target &target, const CompileOptions &opts) {
  std::vector<int> archs = supportedArchs();
  if (!archs.empty() && !llvm::is_contained(archs, target.smVersion())) {
    std::vector<std::string> names;
    for (int a : archs) names.push_back("sm_" + std::to_string(a));
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "NVRTC %s cannot compile for %s; it supports %s", nvrtcVersion().c_str(),
                                   target.name.c_str(), llvm::join(names, ", ").c_str());
  }
  llvm::Expected<std::string> inc = cudaIncludeDir();
  if (!inc) return inc.takeError();
  std::vector<std::string> o = {
      target.nvrtcArchOption(), // a real SM: NVRTC emits a cubin (and the PTX it came from)
      "-std=c++20",             // templates use concepts, if constexpr and friends
      "-default-device",        // helpers without __device__ are device functions
      "-I" + *inc,
  };
  // CUDA 13 keeps libcu++/CUB/Thrust in include/cccl.
  llvm::SmallString<256> cccl(*inc);
  llvm::sys::path::append(cccl, "cccl");
  if (llvm::sys::fs::is_directory(cccl)) o.push_back("-I" + std::string(cccl));
  // No --use_fast_math: approximate exp/rsqrt/division would break the 2e-2 logits tolerance budget.
  if (opts.lineInfo) o.push_back("-lineinfo");
  return o;
}

namespace {

// The cubin's ELF header, where the bytes are a 64-bit little-endian CUDA ELF.
std::optional<Elf64_Ehdr> cudaElfHeader(llvm::ArrayRef<char> cubin) {
  Elf64_Ehdr h;
  if (cubin.size() < sizeof(h)) return std::nullopt;
  std::memcpy(&h, cubin.data(), sizeof(h));
  if (std::memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64 ||
      h.e_ident[EI_DATA] != ELFDATA2LSB || h.e_machine != EM_CUDA)
    return std::nullopt;
  return h;
}

// The T at byte `at` of the cubin, where it lies inside it.
template <class T> std::optional<T> readAt(llvm::ArrayRef<char> cubin, uint64_t at) {
  T v;
  if (at > cubin.size() || cubin.size() - at < sizeof(T)) return std::nullopt;
  std::memcpy(&v, cubin.data() + at, sizeof(T));
  return v;
}

} // namespace

std::optional<int> cubinRegisters(llvm::ArrayRef<char> cubin) {
  std::optional<Elf64_Ehdr> h = cudaElfHeader(cubin);
  if (!h || h->e_shentsize != sizeof(Elf64_Shdr)) return std::nullopt;
  auto section = [&](unsigned i) { return readAt<Elf64_Shdr>(cubin, h->e_shoff + uint64_t(i) * sizeof(Elf64_Shdr)); };
  std::optional<Elf64_Shdr> names = section(h->e_shstrndx);
  if (!names || names->sh_offset > cubin.size()) return std::nullopt;
  const llvm::StringRef nameTable(cubin.data() + names->sh_offset,
                                  std::min<uint64_t>(names->sh_size, cubin.size() - names->sh_offset));
  std::optional<int> most;
  for (unsigned i = 0; i < h->e_shnum; ++i) {
    std::optional<Elf64_Shdr> s = section(i);
    if (!s) return std::nullopt;
    if (s->sh_name >= nameTable.size() || nameTable.drop_front(s->sh_name).split('\0').first != ".nv.info") continue;
    // Attributes: a format byte and an attribute byte, then by format a 16-bit value (2 and 3, as NVRTC 13
    // writes them) or a 16-bit size and that many bytes (4); any other format ends the walk, as its length is
    // not known here. EIATTR_REGCOUNT (0x2f, format 4) holds a function's symbol index, then its registers,
    // both 32-bit.
    uint64_t at = s->sh_offset, end = s->sh_offset + s->sh_size;
    if (end > cubin.size() || end < at) return std::nullopt;
    while (end - at >= 2) {
      const uint8_t format = uint8_t(cubin[at]), attr = uint8_t(cubin[at + 1]);
      at += 2;
      uint64_t size = 2;
      if (format == 4) {
        std::optional<uint16_t> n = end - at >= 2 ? readAt<uint16_t>(cubin, at) : std::nullopt;
        if (!n) break;
        at += 2;
        size = *n;
      } else if (format != 2 && format != 3) {
        break;
      }
      if (end - at < size) break;
      if (format == 4 && attr == 0x2f && size >= 8)
        if (std::optional<uint32_t> regs = readAt<uint32_t>(cubin, at + 4))
          most = std::max(most.value_or(0), int(*regs));
      at += size;
    }
  }
  return most;
}

std::optional<int> cubinSmVersion(llvm::ArrayRef<char> cubin) {
  std::optional<Elf64_Ehdr> h = cudaElfHeader(cubin);
  if (!h) return std::nullopt;
  // CUDA's ELF ABI version 8 (CUDA 12.8+) keeps the SM in bits 8..15 of e_flags (sm_90: 0x5a00); older
  // versions keep it in bits 0..7 (sm_90: 0x5a).
  unsigned abi = h->e_ident[EI_ABIVERSION];
  return abi >= 8 ? int((h->e_flags >> 8) & 0xff) : int(h->e_flags & 0xff);
}

llvm::Expected<CompiledKernel> compileKernel(const KernelSource &src, const Target &target,
                                             const CompileOptions &opts) {
  llvm::Expected<std::vector<std::string>> options = nvrtcOptions(target, opts);
  if (!options) return options.takeError();
  std::vector<const char *> optionPtrs;
  for (const std::string &o : *options) optionPtrs.push_back(o.c_str());

  std::vector<const char *> headerTexts, headerNames;
  for (const EmbeddedHeader &h : src.headers) {
    headerNames.push_back(h.name);
    headerTexts.push_back(h.text);
  }

  // Shared: many threads may compile at once; compileAll takes it exclusively only to fork.
  std::shared_lock<std::shared_mutex> noFork(forkGuard, std::defer_lock);
  if (!inForkedChild) noFork.lock();
  Program prog;
  std::string fileName = fileStem(src.name) + ".cu";
  if (nvrtcResult r = nvrtcCreateProgram(prog.out(), src.text.c_str(), fileName.c_str(), int(headerTexts.size()),
                                         headerTexts.data(), headerNames.data());
      r != NVRTC_SUCCESS)
    return nvrtcError("nvrtcCreateProgram", r, src.name);
  if (!src.entry.empty())
    if (nvrtcResult r = nvrtcAddNameExpression(prog.get(), src.entry.c_str()); r != NVRTC_SUCCESS)
      return nvrtcError("nvrtcAddNameExpression(" + src.entry + ")", r, src.name);

  ++compileCount;
  nvrtcResult compiled = nvrtcCompileProgram(prog.get(), int(optionPtrs.size()), optionPtrs.data());
  CompiledKernel out;
  out.name = src.name;
  out.log = programLog(prog.get());
  if (compiled != NVRTC_SUCCESS) {
    llvm::Expected<std::string> dumped = dumpSource(src, opts);
    std::string where = dumped ? "source dumped to " + *dumped
                               : "the source could not be dumped: " + llvm::toString(dumped.takeError());
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "NVRTC failed to compile kernel '%s' for %s (%s; %s)\nnvrtc options: %s\n%s",
                                   src.name.c_str(), target.name.c_str(), nvrtcGetErrorString(compiled),
                                   where.c_str(), llvm::join(*options, " ").c_str(),
                                   out.log.empty() ? "(NVRTC gave no log)" : out.log.c_str());
  }

  // ptxas serialises wgmma across anything it cannot see through (a call, a spill of the accumulators) and
  // only warns: the kernel would run, several times slower. Refuse it like a compile error.
  if (out.log.find("wgmma.mma_async instructions are serialized") != std::string::npos)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "kernel '%s' for %s: ptxas serialised its wgmma instructions (keep the wgmma "
                                   "helpers inlined and the accumulators in registers)\n%s",
                                   src.name.c_str(), target.name.c_str(), out.log.c_str());

  if (!src.entry.empty()) {
    const char *lowered = nullptr;
    if (nvrtcResult r = nvrtcGetLoweredName(prog.get(), src.entry.c_str(), &lowered); r != NVRTC_SUCCESS || !lowered)
      return nvrtcError("nvrtcGetLoweredName(" + src.entry + ")", r, src.name);
    out.loweredName = lowered;
  }

  size_t cubinSize = 0;
  if (nvrtcResult r = nvrtcGetCUBINSize(prog.get(), &cubinSize); r != NVRTC_SUCCESS)
    return nvrtcError("nvrtcGetCUBINSize", r, src.name);
  out.cubin.resize(cubinSize);
  if (cubinSize)
    if (nvrtcResult r = nvrtcGetCUBIN(prog.get(), out.cubin.data()); r != NVRTC_SUCCESS)
      return nvrtcError("nvrtcGetCUBIN", r, src.name);
  if (out.cubin.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "NVRTC produced no cubin for kernel '%s' (%s)",
                                   src.name.c_str(), target.name.c_str());

  // PTX is kept too (it is produced even for sm_XXa targets): for --emit=ptx and for reading what was built.
  size_t ptxSize = 0;
  if (nvrtcGetPTXSize(prog.get(), &ptxSize) == NVRTC_SUCCESS && ptxSize > 1) {
    out.ptx.resize(ptxSize);
    if (nvrtcGetPTX(prog.get(), out.ptx.data()) != NVRTC_SUCCESS) out.ptx.clear();
    while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back(); // the size counts the NUL
  }
  return out;
}

} // namespace minfer
