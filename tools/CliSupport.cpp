// tools/CliSupport.cpp — minferc's error format, command-line checks, --version, timings and progress.
#include "tools/CliSupport.h"

#include "ir/Diagnostics.h"
#include "jit/Nvrtc.h"
#include "runtime/Driver.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <memory>
#include <optional>

#ifndef MINFER_VERSION
#define MINFER_VERSION "unknown"
#endif
#ifndef MINFER_REVISION
#define MINFER_REVISION "unknown"
#endif

namespace cl = llvm::cl;

namespace minfer::cli {
namespace {

constexpr const char *kTool = "minferc";

llvm::Error usageError(const llvm::Twine &msg) { return ir::makeError(msg); }

// The closest of `candidates` to `typed`, when it is close enough to be a likely typo: at most a third of
// the word's letters (and at least 2) edited. "" otherwise.
std::string nearest(llvm::StringRef typed, llvm::ArrayRef<llvm::StringRef> candidates) {
  unsigned limit = std::max<unsigned>(2, unsigned(typed.size()) / 3), best = limit + 1;
  std::string found;
  for (llvm::StringRef c : candidates) {
    unsigned d = typed.edit_distance(c, /*AllowReplacements=*/true, /*MaxEditDistance=*/limit + 1);
    if (d < best) best = d, found = c.str();
  }
  return found;
}

std::vector<llvm::StringRef> subcommandNames() {
  std::vector<llvm::StringRef> names;
  for (cl::SubCommand *s : cl::getRegisteredSubcommands())
    if (!s->getName().empty()) names.push_back(s->getName());
  std::sort(names.begin(), names.end());
  return names;
}

// The value `value` of an enum option: one of its literals, or an error listing them.
llvm::Error checkEnumValue(const cl::Option &o, llvm::StringRef typed, llvm::StringRef value) {
  for (const EnumValues &e : enumOptions()) {
    if (e.option != &o) continue;
    if (e.parser->findOption(value) != e.parser->getNumOptions()) return llvm::Error::success();
    std::vector<std::string> names;
    for (unsigned i = 0; i < e.parser->getNumOptions(); ++i) names.push_back(e.parser->getOption(i).str());
    return usageError(typed + ": unknown value '" + value + "'; expected one of: " + llvm::join(names, ", "));
  }
  return llvm::Error::success();
}

} // namespace

std::vector<EnumValues> &enumOptions() {
  static std::vector<EnumValues> all;
  return all;
}

int fail(llvm::Error err) {
  llvm::errs() << ir::renderError(std::move(err), kTool);
  return 1;
}

void warn(const llvm::Twine &msg) { llvm::errs() << kTool << ": warning: " << msg << "\n"; }
void note(const llvm::Twine &msg) { llvm::errs() << kTool << ": note: " << msg << "\n"; }

llvm::Error checkArguments(int argc, const char *const *argv) {
  cl::SubCommand *sub = &*cl::TopLevelSubCommand;
  int first = 1;
  std::string help = std::string(kTool) + " --help";
  if (argc > 1 && argv[1][0] != '-') {
    llvm::StringRef word = argv[1];
    for (cl::SubCommand *s : cl::getRegisteredSubcommands())
      if (!s->getName().empty() && s->getName() == word) sub = s, first = 2;
    // Not a subcommand: the model file of `minferc model.ir`, unless no such file exists and the word looks
    // like a misspelt subcommand (close to one, or a bare word without a path or an extension).
    if (first == 1 && !llvm::sys::fs::exists(word)) {
      std::vector<llvm::StringRef> subs = subcommandNames();
      std::string near = nearest(word, subs);
      if (!near.empty())
        return usageError("unknown subcommand '" + word + "'; did you mean '" + near + "'?");
      if (!word.contains('.') && !word.contains('/'))
        return usageError("'" + word + "' is neither a file nor a subcommand (" + llvm::join(subs, ", ") + ")");
    }
    if (first == 2) help = std::string(kTool) + " " + word.str() + " --help";
  }

  llvm::StringMap<cl::Option *> &options = cl::getRegisteredOptions(*sub);
  for (int i = first; i < argc; ++i) {
    llvm::StringRef arg = argv[i];
    if (arg == "--") break; // everything after is positional
    if (!arg.startswith("-") || arg == "-") continue;
    auto [typed, value] = arg.split('=');
    bool hasValue = arg.contains('=');
    llvm::StringRef name = typed.ltrim('-');
    cl::Option *o = options.lookup(name);
    if (!o) {
      std::vector<llvm::StringRef> visible;
      for (auto &entry : options)
        if (entry.second->getOptionHiddenFlag() != cl::ReallyHidden && !entry.second->isPositional())
          visible.push_back(entry.first());
      std::string near = nearest(name, visible);
      if (!near.empty()) return usageError("unknown option '" + typed + "'; did you mean '--" + near + "'?");
      return usageError("unknown option '" + typed + "'; see " + help);
    }
    if (!hasValue && o->getValueExpectedFlag() == cl::ValueRequired) {
      if (i + 1 >= argc) return usageError("option '" + typed + "' needs a value");
      value = argv[++i];
    } else if (!hasValue) {
      continue;
    }
    if (auto e = checkEnumValue(*o, typed, value)) return e;
  }
  return llvm::Error::success();
}

bool parseCommandLine(int argc, const char *const *argv, llvm::StringRef overview) {
  if (auto e = checkArguments(argc, argv)) {
    fail(std::move(e));
    return false;
  }
  // What is left for llvm::cl to find (positional arguments, values it cannot parse) in minferc's format:
  // its "minferc: message!" becomes "minferc: error: message".
  std::string messages;
  llvm::raw_string_ostream os(messages);
  bool ok = cl::ParseCommandLineOptions(argc, argv, overview, &os);
  os.flush();
  if (messages.empty()) return ok;
  llvm::SmallVector<llvm::StringRef> lines;
  llvm::StringRef(messages).rtrim('\n').split(lines, '\n');
  bool firstError = true;
  for (llvm::StringRef line : lines) {
    if (line.startswith(kTool) && line.contains(": ")) {
      llvm::StringRef msg = line.split(": ").second.trim().rtrim('!');
      llvm::errs() << kTool << (firstError ? ": error: " : ": ") << msg << "\n";
      firstError = false;
      continue;
    }
    llvm::errs() << line << "\n";
  }
  return ok;
}

llvm::Error checkOutputPath(llvm::StringRef path, llvm::StringRef flag) {
  if (path == "-") return llvm::Error::success();
  std::string what = (flag + " '" + path + "': cannot write file: ").str();
  if (llvm::sys::fs::is_directory(path)) return usageError(what + "it is a directory");
  llvm::StringRef dir = llvm::sys::path::parent_path(path);
  std::string dirName = dir.empty() ? "." : dir.str();
  llvm::sys::fs::file_status st;
  if (std::error_code ec = llvm::sys::fs::status(dirName, st)) {
    if (ec == std::errc::no_such_file_or_directory)
      return usageError(what + "directory '" + dirName + "' does not exist");
    return usageError(what + "directory '" + dirName + "': " + ec.message());
  }
  if (!llvm::sys::fs::is_directory(st)) return usageError(what + "'" + dirName + "' is not a directory");
  if (std::error_code ec = llvm::sys::fs::access(dirName, llvm::sys::fs::AccessMode::Write))
    return usageError(what + "directory '" + dirName + "': " + ec.message());
  return llvm::Error::success();
}

void printVersion(llvm::raw_ostream &os) {
  os << "minferc (minfer) " << MINFER_VERSION << ", revision " << MINFER_REVISION << "\n";
  os << "  NVRTC " << nvrtcVersion() << "\n";
  os << "  CUDA toolkit " << cuda::versionString(cuda::headerCudaVersion()) << " (the headers minfer was built with)\n";
  auto driver = cuda::driverVersion();
  if (driver) {
    os << "  CUDA driver " << cuda::versionString(*driver) << " (" << *driver << ")\n";
  } else {
    // The reason up to the advice after it: "no CUDA driver: cannot load libcuda.so.1: ...".
    std::string why = llvm::toString(driver.takeError());
    llvm::StringRef reason = llvm::StringRef(why).split(';').first;
    reason.consume_front("no CUDA driver: ");
    os << "  CUDA driver: no driver (" << reason << ")\n";
  }
  os << "  LLVM " << LLVM_VERSION_STRING << "\n";
}

std::string humanBytes(double b) {
  const char *units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) b /= 1000, ++u;
  return llvm::formatv("{0:f1} {1}", b, units[u]).str();
}

void PhaseTimes::add(llvm::StringRef phase, double ms, llvm::StringRef note, unsigned depth) {
  rows.push_back({phase.str(), ms, note.str(), depth});
}

void PhaseTimes::print(llvm::raw_ostream &os, double totalMs) const {
  size_t width = 5; // "total"
  for (const Row &r : rows) width = std::max(width, r.phase.size() + 2 * r.depth);
  auto pad = [&](const std::string &s) { return s + std::string(width - s.size(), ' '); };
  os << kTool << " timings:\n" << llvm::formatv("  {0} {1,10} {2,6}\n", pad("phase"), "ms", "%");
  for (const Row &r : rows) {
    os << llvm::formatv("  {0} {1,10:f1} {2,5:f1}%", pad(std::string(2 * r.depth, ' ') + r.phase), r.ms,
                        totalMs > 0 ? 100 * r.ms / totalMs : 0.0);
    if (!r.note.empty()) os << "  " << r.note;
    os << "\n";
  }
  os << llvm::formatv("  {0} {1,10:f1} {2,5:f1}%\n", pad("total"), totalMs, 100.0);
}

Progress::Progress(std::string label) : label(std::move(label)), tty(llvm::errs().is_displayed()) {}

void Progress::update(size_t index, size_t total, llvm::StringRef item, llvm::StringRef detail, bool finished) {
  if (tty) {
    // 24 columns of bar leave room for the kernel's name on an 80-column terminal.
    int width = 24, filled = static_cast<int>(width * (index - (finished ? 0 : 1)) / std::max<size_t>(total, 1));
    llvm::errs() << "\r\x1b[K[" << std::string(filled, '#') << std::string(width - filled, '.') << "] kernel " << index
                 << "/" << total << " " << item.substr(0, 60) << ": " << detail;
    if (finished && index == total) llvm::errs() << "\n";
  } else if (finished) {
    llvm::errs() << label << ": kernel " << index << "/" << total << " " << item << ": " << detail << "\n";
  }
}

void addCompileTimes(PhaseTimes &times, const CompileStats &st, double wallMs) {
  times.add("cache lookups", st.lookupSeconds * 1e3, llvm::formatv("{0} kernels, {1} hits", st.kernels, st.hits).str());
  std::string where =
      st.workers ? llvm::formatv(" in {0} worker processes (wall time; below, each kernel's own)", st.workers).str() : "";
  times.add("nvrtc", std::max(0.0, wallMs - st.lookupSeconds * 1e3),
            llvm::formatv("{0} kernels compiled{1}", st.misses, where).str());
  std::vector<KernelCompileTime> byTime = st.compiled;
  llvm::sort(byTime, [](const auto &a, const auto &b) { return a.ms > b.ms; });
  for (const KernelCompileTime &k : byTime) times.add(k.name, k.ms, "", /*depth=*/1);
}

CompileProgressFn compileProgress() {
  auto progress = std::make_shared<Progress>("compile");
  auto start = std::make_shared<std::optional<Clock::time_point>>();
  return [progress, start](const CompileProgress &p) {
    // The compile began about when the first kernel to finish began.
    if (!*start) *start = Clock::now() - std::chrono::microseconds(int64_t(p.ms * 1e3));
    double elapsed = msSince(**start) / 1e3;
    std::string detail = p.hit ? std::string("in the cache") : llvm::formatv("compiled in {0:f0} ms", p.ms).str();
    if (p.done < p.total) detail += llvm::formatv(", ~{0:f0} s left", elapsed / p.done * (p.total - p.done)).str();
    progress->update(p.done, p.total, p.name, detail, /*finished=*/true);
  };
}

} // namespace minfer::cli
