// bench/main.cpp — minfer_kernel_bench: runs the registered kernel benchmark suites on device 0.
//
//   minfer_kernel_bench [--suite NAME] [--filter REGEX] [--out FILE.json] [--shapes-out FILE.json] [--list]
//
// Initialises the driver (exit 1 with the reason when there is no GPU), measures the copy-bandwidth
// ceiling, runs each suite (bench/<family>Bench.cpp registers it with a static bench::Registration),
// prints one JSON object per result on stdout, and writes them all as one JSON array to --out. --shapes-out
// writes the shapes that ran, one object each ({"kind": "gemm", "M": 1, "N": 5632, "K": 2048, ...}), for
// bench/torch_baseline.py to time PyTorch on the same shapes. Progress and the device go to stderr. A
// failing suite is reported and the others still run; the exit code is then 1.
#include "bench/Bench.h"
#include "jit/AtomicFile.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <regex>

using namespace minfer;
using llvm::StringRef;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("minfer_kernel_bench options");
cl::opt<std::string> suiteName("suite", cl::desc("Run only this suite (default: all)"), cl::value_desc("NAME"),
                               cl::cat(category));
cl::opt<std::string> outPath("out", cl::desc("Write all results as one JSON array to this file"),
                             cl::value_desc("FILE.json"), cl::cat(category));
cl::opt<std::string> shapesPath("shapes-out", cl::desc("Write the shapes that ran (for bench/torch_baseline.py)"),
                                cl::value_desc("FILE.json"), cl::cat(category));
cl::opt<std::string> filter("filter",
                            cl::desc("In the matmul and attention suites, run only the kernels whose name and shape "
                                     "match this regular expression (e.g. 'pp_epi_qkv.*M=2048', 'd64_wgmma.*tokens=2048')"),
                            cl::value_desc("REGEX"), cl::cat(category));
cl::opt<bool> listSuites("list", cl::desc("Print the registered suites and exit"), cl::cat(category));

int failWith(const llvm::Twine &msg) {
  llvm::errs() << "minfer_kernel_bench: " << msg << "\n";
  return 1;
}

// "M=1 N=5632 K=2048" -> {"M": 1, "N": 5632, "K": 2048}; a value that is not an integer stays a string,
// a token without '=' is left out.
void addShapeDims(StringRef shape, llvm::json::Object &into) {
  llvm::SmallVector<StringRef, 8> tokens;
  shape.split(tokens, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef tok : tokens) {
    auto [key, value] = tok.split('=');
    if (key.empty() || value.empty() || into.get(key)) continue;
    // Keys and strings as std::string: a json::Object built from a StringRef borrows it, and `shape`
    // dies before the object is written.
    int64_t n = 0;
    if (!value.getAsInteger(10, n))
      into[key.str()] = n;
    else
      into[key.str()] = value.str();
  }
}

llvm::Error writeJSON(StringRef path, llvm::json::Value value) {
  return writeAtomically(path, [&](llvm::raw_ostream &os) {
    os << llvm::formatv("{0:2}", value) << "\n";
    return llvm::Error::success();
  });
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv, "minfer kernel benchmarks: JSON lines on stdout\n");

  std::vector<bench::Suite> &all = bench::suites();
  if (listSuites) {
    for (const bench::Suite &s : all) llvm::outs() << s.name << "\n";
    return 0;
  }
  std::vector<const bench::Suite *> chosen;
  for (const bench::Suite &s : all)
    if (suiteName.empty() || s.name == suiteName) chosen.push_back(&s);
  if (!suiteName.empty() && chosen.empty()) {
    std::vector<std::string> names;
    for (const bench::Suite &s : all) names.push_back(s.name);
    return failWith("unknown suite '" + suiteName + "'; registered: " +
                    (names.empty() ? std::string("none") : llvm::join(names, ", ")));
  }

  try {
    bench::setFilter(filter);
  } catch (const std::regex_error &e) {
    return failWith("--filter '" + filter + "' is not a regular expression: " + e.what());
  }

  if (llvm::Error e = cuda::init()) return failWith(llvm::toString(std::move(e)));
  auto info = cuda::deviceInfo();
  if (!info) return failWith(llvm::toString(info.takeError()));
  llvm::errs() << "device: " << info->name << " (sm_" << info->major << info->minor << ", " << info->smCount
               << " SMs, " << (info->totalMemory >> 20) << " MiB), driver " << info->driverVersion / 1000 << "."
               << (info->driverVersion % 1000) / 10 << "\n";
  auto ceilings = bench::measureCeilings();
  if (!ceilings) return failWith("measuring the copy bandwidth: " + llvm::toString(ceilings.takeError()));
  llvm::errs() << llvm::formatv("device-to-device copy: {0:F0} GB/s (read + write)\n", ceilings->copyGBps);
  if (chosen.empty()) llvm::errs() << "no suites registered: nothing to run\n";

  llvm::json::Array results, shapes;
  bool failed = false;
  for (const bench::Suite *s : chosen) {
    llvm::errs() << "suite " << s->name << "...\n";
    auto rs = s->run(*ceilings);
    if (!rs) {
      llvm::errs() << "minfer_kernel_bench: suite " << s->name << " failed: " << llvm::toString(rs.takeError())
                   << "\n";
      failed = true;
      continue;
    }
    for (const bench::Result &r : *rs) {
      llvm::json::Object obj = bench::toJSON(r, *ceilings);
      obj["suite"] = s->name;
      obj["device"] = info->name;
      llvm::outs() << llvm::formatv("{0}", llvm::json::Value(llvm::json::Object(obj))) << "\n";
      llvm::outs().flush();
      results.push_back(std::move(obj));

      llvm::json::Object shape{{"kind", r.baseline.empty() ? s->name : r.baseline},
                               {"suite", s->name},
                               {"kernel", r.kernel},
                               {"shape", r.shape}};
      addShapeDims(r.shape, shape);
      shapes.push_back(std::move(shape));
    }
  }

  if (!outPath.empty())
    if (llvm::Error e = writeJSON(outPath, std::move(results))) return failWith(llvm::toString(std::move(e)));
  if (!shapesPath.empty())
    if (llvm::Error e = writeJSON(shapesPath, std::move(shapes))) return failWith(llvm::toString(std::move(e)));
  return failed ? 1 : 0;
}
