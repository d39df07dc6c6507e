// tools/CliSupport.h — what minferc's subcommands share beyond llvm::cl: the one error format, the command
// line checked before llvm::cl sees it, output paths checked before any work, --version, the --time-passes
// table, and the progress display of long jobs.
//
// llvm::cl reports an unknown option and parses on, so one typo cascades into "Too many positional
// arguments"; it names a bad enum value without the valid ones. checkArguments stops at the first problem
// and says what was meant instead, and parseCommandLine gives llvm::cl's remaining messages minferc's
// prefix: every error without a source location reads `minferc: error: ...`.
#pragma once

#include "jit/ParallelCompile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <string>
#include <vector>

namespace minfer::cli {

// Prints `err` as `minferc: error: ...` (a located diagnostic, `file:line:col: error: ...`, as it is) and
// returns the exit code of a user error, 1.
int fail(llvm::Error err);
// Prints `minferc: warning: msg`.
void warn(const llvm::Twine &msg);
// Prints `minferc: note: msg` (what to do next, after an error).
void note(const llvm::Twine &msg);

// Registers an enum option, so that checkArguments can list its values when given another.
template <class T> void enumOption(llvm::cl::opt<T> &o);

// The command line checked against the registered subcommands and options before llvm::cl parses it: the
// first unknown subcommand, unknown option, bad enum value or missing option value is an error naming the
// nearest valid spelling.
llvm::Error checkArguments(int argc, const char *const *argv);
// checkArguments, then llvm::cl::ParseCommandLineOptions with its messages in minferc's format. False when
// the command line is bad (the error has been printed).
bool parseCommandLine(int argc, const char *const *argv, llvm::StringRef overview);

// Checks that `path` (given with `flag`, for the message) can be written, before any work: its directory
// exists and is writable, and it is not itself a directory. "-" (standard output) always can.
llvm::Error checkOutputPath(llvm::StringRef path, llvm::StringRef flag);

// minferc --version: minfer and its source revision, and the versions its kernels depend on.
void printVersion(llvm::raw_ostream &os);

// "2.2 GB"
std::string humanBytes(double bytes);

using Clock = std::chrono::steady_clock;
inline double msSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// --time-passes (--timings): the measured phases of one command, printed as a table at its end. Rows are
// added as phases finish; `depth` 1 rows detail the row above them (each kernel's compile under "nvrtc").
class PhaseTimes {
public:
  void add(llvm::StringRef phase, double ms, llvm::StringRef note = "", unsigned depth = 0);
  // The table, with each row's share of `totalMs` (the whole command's wall time).
  void print(llvm::raw_ostream &os, double totalMs) const;

private:
  struct Row {
    std::string phase;
    double ms;
    std::string note;
    unsigned depth;
  };
  std::vector<Row> rows;
};

// A compile's cache lookups and NVRTC time (the wall time of `wallMs` less the lookups), and under it each
// kernel compiled with its own time (in its worker: they overlap), slowest first.
void addCompileTimes(PhaseTimes &times, const CompileStats &st, double wallMs);

// Progress of a long job on stderr, item by item: a bar redrawn in place on a terminal, one line per
// finished item otherwise (logs, CI). `label` starts each plain line ("autotune", "compile").
class Progress {
public:
  explicit Progress(std::string label);
  // Item `index` of `total` (1-based) is running, or `finished`; `detail` says how it went.
  void update(size_t index, size_t total, llvm::StringRef item, llvm::StringRef detail, bool finished);

private:
  std::string label;
  bool tty;
};

// The progress of kernels compiling (Progress labelled "compile"): each compiled kernel with its time and
// an estimate of the time left; nothing when every kernel is in the cache.
CompileProgressFn compileProgress();

// ----- implementation of the template above

struct EnumValues {
  const llvm::cl::Option *option;
  llvm::cl::generic_parser_base *parser; // findOption is not const
};
std::vector<EnumValues> &enumOptions();

template <class T> void enumOption(llvm::cl::opt<T> &o) { enumOptions().push_back({&o, &o.getParser()}); }

} // namespace minfer::cli
