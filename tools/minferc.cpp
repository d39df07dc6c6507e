// tools/minferc.cpp — the minfer command-line driver.
// (Over 650 lines: every subcommand's options are declared together at the top, as llvm::cl wants, and
// each subcommand is one short function below them; what they share is in tools/CliSupport.h.)
//
//   minferc model.ir [--emit=ir] [-o out.ir]        parse, verify, print
//   minferc model.ir --target sm_89 -o model.mfb    plan, compile every kernel (NVRTC, cached), bundle
//   minferc model.ir --target sm_89 --emit=plan|cuda
//   minferc import-hf DIR -o model.ir               HF checkpoint directory → IR
//   minferc run MODEL --prompt TEXT | --prompt-ids 1,2,3 ...
//                                                   generation on the GPU (or the CPU reference interpreter)
//   minferc tokenize DIR --text TEXT                the ids of TEXT with the checkpoint's tokenizer
//   minferc detokenize DIR --ids 1,2,3              the text of ids
//   minferc cache ls|verify|clear                   the kernel cache
//
// Library code returns errors; only this file prints them and picks the exit code: 0 on success, 1 on a
// user error, with one message (`minferc: error: ...`, or `file:line:col: error: ...` in a model file)
// and no half-written output file. Output paths are checked before any work; --time-passes breaks a
// compile or a run into its phases.
#include "compiler/Pipeline.h"
#include "jit/AtomicFile.h"
#include "jit/Bundle.h"
#include "io/HFImport.h"
#include "jit/KernelCache.h"
#include "io/Npy.h"
#include "jit/ParallelCompile.h"
#include "compiler/Plan.h"
#include "io/Safetensors.h"
#include "io/Tokenizer.h"
#include "compiler/Tuning.h"
#include "io/WeightLoader.h"
#include "ir/Diagnostics.h"
#include "ir/Interpreter.h"
#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "runtime/Autotune.h"
#include "runtime/Engine.h"
#include "runtime/Session.h"
#include "tools/CliSupport.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>

using namespace minfer;
using cli::fail;
using cli::humanBytes;
using cli::msSince;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("minferc options");

cl::SubCommand importCmd("import-hf", "Write the IR of a Hugging Face checkpoint directory (config.json, *.safetensors)");
cl::SubCommand runCmd("run", "Generate tokens from a model (an .ir file, a bundle or an HF checkpoint directory)");
cl::SubCommand autotuneCmd("autotune", "Tune the tile sizes of a model's kernels on this GPU, into the device's tuning database");
cl::SubCommand tokenizeCmd("tokenize", "Print the token ids of a text (no BOS or EOS added) with a checkpoint's tokenizer");
cl::SubCommand detokenizeCmd("detokenize", "Print the text of token ids with a checkpoint's tokenizer");
cl::SubCommand cacheCmd("cache", "List, verify or clear the kernel cache ($MINFER_CACHE_DIR, $XDG_CACHE_HOME/minfer or ~/.cache/minfer)");

// ----- top level: minferc model.ir
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.ir>"), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
enum class Emit { IR, Plan, Cuda, Bundle };
cl::opt<Emit> emit("emit", cl::desc("What to write (default: a bundle with --target, else the IR)"),
                   cl::values(clEnumValN(Emit::IR, "ir", "the verified module as IR text"),
                              clEnumValN(Emit::Plan, "plan", "the launch plan of prefill and decode, as JSON"),
                              clEnumValN(Emit::Cuda, "cuda", "the generated CUDA source of every kernel"),
                              clEnumValN(Emit::Bundle, "bundle", "compiled kernels + plan + manifest (.mfb)")),
                   cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
// The --target help lists exactly what parseTarget accepts.
llvm::StringRef targetHelp() {
  static const std::string help = "GPU architecture: " + llvm::join(validTargets(), ", ");
  return help;
}
cl::opt<std::string> targetName("target", cl::desc(targetHelp()),
                                cl::value_desc("sm_XY"), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<unsigned> jobs("j", cl::desc("Kernels compiled in parallel, in worker processes (default: the cores)"),
                       cl::value_desc("N"), cl::init(0), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<bool> noFuse("no-fuse", cl::desc("Skip the fusion pass: one kernel per IR op (for comparison)"),
                     cl::cat(category));
enum class PrintAfter { None, Fuse };
cl::opt<PrintAfter> printAfter("print-after", cl::desc("Print the IR after a pass to standard error (default: none)"),
                               cl::values(clEnumValN(PrintAfter::Fuse, "fuse", "after the fusion pass")),
                               cl::init(PrintAfter::None), cl::cat(category));
cl::opt<std::string> dumpDir("dump-dir", cl::desc("Write every stage: the IR, the plan, each kernel's .cu, .cubin and .ptx"),
                             cl::value_desc("dir"), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<int64_t> maxBatch("max-batch", cl::desc("Sequences decoded together (plan size) (default: 1)"), cl::init(1),
                          cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<int64_t> maxSeq("max-seq", cl::desc("Tokens a sequence may hold (default: the model's max_pos)"), cl::init(0),
                        cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<bool> weightRing("weight-ring",
                         cl::desc("The persistent decode kernel streams its matmul weights through a shared-memory ring "
                                  "(sm_90 and later; the plan's decode.persistent.weight_ring says what was built)"),
                         cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<bool> noGainsInWeights("no-gains-in-weights",
                               cl::desc("Keep each RMS norm's gamma in the norm instead of multiplying it into the "
                                        "weights of the matmuls that read it (sm_90a; the plan's gains_in_weights)"),
                               cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<bool> noGemmFoldsNorm("no-gemm-folds-norm",
                             cl::desc("Launch the prefill's RMS norms instead of folding them across the wgmma gemms "
                                      "around them (sm_90a; the plan's gemm_folds_norm)"),
                             cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<int64_t> maxPrefill("max-prefill-tokens",
                            cl::desc("Tokens of one prefill step (default: 2048, or what the caches hold)"), cl::init(0),
                            cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<std::string> tuneModel(cl::Positional, cl::desc("<model.ir | model.mfb | checkpoint dir>"), cl::sub(autotuneCmd), cl::cat(category));
cl::list<std::string> tuneBuckets("buckets", cl::CommaSeparated,
                                  cl::desc("Buckets of rows to tune for (default decode:1,prefill:513-2048); any of "
                                           "decode:1, decode:2-8, decode:9-16, decode:17-64, decode:65+, prefill:1-512, "
                                           "prefill:513-2048, prefill:2049+"),
                                  cl::sub(autotuneCmd), cl::cat(category));
cl::opt<bool> tuneShow("show", cl::desc("List what is tuned, for which device, and exit"), cl::sub(autotuneCmd), cl::cat(category));
cl::opt<bool> tuneRetune("retune", cl::desc("Time kernels the database has already"), cl::sub(autotuneCmd), cl::cat(category));
cl::opt<bool> tuneNoFuse("no-fuse", cl::desc("Tune the unfused plan's kernels"), cl::sub(autotuneCmd), cl::cat(category));
cl::opt<unsigned> tuneJobs("j", cl::desc("Kernels compiled in parallel (default: the cores)"), cl::init(0), cl::sub(autotuneCmd),
                           cl::cat(category));
cl::opt<bool> tuneInStep("in-step",
                         cl::desc("Then time the model's whole decode step (or prefill) in each bucket, on its weights, and "
                                  "move kernels to their default or a runner-up tile where that makes it faster"),
                         cl::sub(autotuneCmd), cl::cat(category));
cl::opt<int64_t> tuneContext("in-step-context",
                             cl::desc("With --in-step: prompt tokens per sequence before a decode bucket's timed steps, "
                                      "the context its attention reads (default 128)"),
                             cl::init(128), cl::sub(autotuneCmd), cl::cat(category));
cl::opt<std::string> tuneWeights("weights", cl::desc("With --in-step: the weights (default: MODEL when it is a directory; "
                                                      "for an .ir file, synthetic weights)"),
                                 cl::value_desc("path"), cl::sub(autotuneCmd), cl::cat(category));
cl::opt<std::string> cacheAction(cl::Positional, cl::desc("<ls|verify|clear>"), cl::sub(cacheCmd), cl::cat(category));
cl::opt<bool> splitInput("split-input-file",
                         cl::desc("Treat each `// -----`-separated chunk of the input as its own module"),
                         cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: standard output)"), cl::value_desc("file"),
                                cl::init("-"), cl::sub(*cl::TopLevelSubCommand), cl::sub(importCmd), cl::cat(category));

// ----- import-hf DIR
cl::opt<std::string> importDir(cl::Positional, cl::desc("<checkpoint dir>"), cl::Required, cl::sub(importCmd), cl::cat(category));

// ----- run MODEL
cl::opt<std::string> runModel(cl::Positional, cl::desc("<model.ir | model.mfb | checkpoint dir>"), cl::Required, cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> weightsPath("weights", cl::desc("Weights: a .safetensors file, an index.json, or a directory (default: MODEL when it is a directory)"),
                                 cl::value_desc("path"), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> promptIds("prompt-ids", cl::desc("Prompt token ids, comma-separated (prints the generated ids)"),
                               cl::value_desc("1,2,3"), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> promptText("prompt",
                                cl::desc("Prompt text, tokenized with the checkpoint's tokenizer (BOS added as it says); "
                                         "the generated text is streamed, ending at its EOS"),
                                cl::value_desc("text"), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> tokenizerPath("tokenizer",
                                   cl::desc("Directory of the tokenizer for --prompt (default: MODEL, or --weights, "
                                            "when a directory)"),
                                   cl::value_desc("dir"), cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> maxNewTokens("max-new-tokens", cl::desc("Number of tokens to generate (default: 16)"), cl::init(16),
                              cl::sub(runCmd), cl::cat(category));
enum class Backend { Gpu, Reference };
cl::opt<Backend> backend("backend", cl::desc("Where to run (default: gpu)"),
                         cl::values(clEnumValN(Backend::Gpu, "gpu", "minfer's kernels on the GPU (default)"),
                                    clEnumValN(Backend::Reference, "reference", "the fp32 CPU reference interpreter")),
                         cl::init(Backend::Gpu), cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> runBatch("batch", cl::desc("Sequences generated together, each from the prompt (GPU) (default: 1)"), cl::init(1),
                          cl::sub(runCmd), cl::cat(category));
cl::opt<float> temperature("temperature", cl::desc("Sampling temperature; 0 is greedy (GPU) (default: 0)"), cl::init(0.f),
                           cl::sub(runCmd), cl::cat(category));
cl::opt<int> topK("top-k", cl::desc("Keep the k most likely tokens; 0 keeps all (GPU) (default: 0)"), cl::init(0), cl::sub(runCmd),
                  cl::cat(category));
cl::opt<float> topP("top-p", cl::desc("Keep the smallest set of tokens with this much probability (GPU) (default: 1)"),
                    cl::init(1.f), cl::sub(runCmd), cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the sampler (GPU) (default: 0)"), cl::init(0), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> stopIds("stop-ids", cl::desc("Stop a sequence after one of these token ids, e.g. the EOS (GPU)"),
                             cl::value_desc("2,..."), cl::sub(runCmd), cl::cat(category));
cl::opt<bool> runNoFuse("no-fuse", cl::desc("Skip the fusion pass: one kernel per IR op (for comparison)"),
                        cl::sub(runCmd), cl::cat(category));
cl::opt<bool> runNoGainsInWeights("no-gains-in-weights",
                                  cl::desc("Keep each RMS norm's gamma in the norm, not in the matmul weights (sm_90a)"),
                                  cl::sub(runCmd), cl::cat(category));
cl::opt<bool> runNoGemmFoldsNorm("no-gemm-folds-norm",
                                 cl::desc("Launch the prefill's RMS norms instead of folding them into the gemms (sm_90a)"),
                                 cl::sub(runCmd), cl::cat(category));
cl::opt<bool> noGraph("no-cuda-graph", cl::desc("Launch the decode kernels one by one instead of replaying a CUDA graph"),
                      cl::sub(runCmd), cl::cat(category));
cl::opt<rt::DecodePath> decodePath(
    "decode", cl::desc("How a decode step runs (default: launches)"),
    cl::values(clEnumValN(rt::DecodePath::Launches, "launches", "one kernel launch per op"),
               clEnumValN(rt::DecodePath::Persistent, "persistent",
                          "one persistent kernel runs the step's ops (fused models, batch <= 8)")),
    cl::init(rt::DecodePath::Launches), cl::sub(runCmd), cl::cat(category));
cl::opt<bool> runWeightRing("weight-ring",
                            cl::desc("With --decode=persistent, stream the matmul weights through a shared-memory ring"),
                            cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> runTarget("target", cl::desc("Expected GPU architecture (default: the GPU's own)"),
                               cl::value_desc("sm_XY"), cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> runMaxSeq("max-seq", cl::desc("Cache positions per sequence (default: the model's max_pos)"),
                           cl::init(0), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> logitsOut("logits-out",
                               cl::desc("Write float32 [rows, vocab] logits as .npy: one row per prompt position, then "
                                        "one per generated token fed back"),
                               cl::value_desc("file.npy"), cl::sub(runCmd), cl::cat(category));

// ----- top level and run: where the time went
cl::opt<bool> timePasses("time-passes",
                         cl::desc("Print the time of each phase to standard error at the end: parse, fuse, plan, "
                                  "cache, each kernel's NVRTC compile, and for run modules, weights, prefill, decode "
                                  "(default: off)"),
                         cl::sub(*cl::TopLevelSubCommand), cl::sub(runCmd), cl::cat(category));
cl::alias timingsAlias("timings", cl::desc("Alias for --time-passes"), cl::aliasopt(timePasses), cl::cat(category));

// ----- tokenize DIR --text TEXT / detokenize DIR --ids 1,2,3
cl::opt<std::string> tokenizeDir(cl::Positional, cl::desc("<checkpoint or tokenizer dir>"), cl::Required,
                                 cl::sub(tokenizeCmd), cl::sub(detokenizeCmd), cl::cat(category));
cl::opt<std::string> tokenizeText("text", cl::desc("The text to tokenize"), cl::value_desc("text"), cl::Required,
                                  cl::sub(tokenizeCmd), cl::cat(category));
cl::opt<std::string> detokenizeIds("ids", cl::desc("Token ids, comma-separated"), cl::value_desc("1,2,3"), cl::Required,
                                   cl::sub(detokenizeCmd), cl::cat(category));

// Writes `text` to `path` (stdout for "-"), atomically.
llvm::Error writeOutput(llvm::StringRef path, llvm::StringRef text) {
  if (path == "-") {
    llvm::outs() << text;
    return llvm::Error::success();
  }
  return writeAtomically(path, text);
}

// Writes float32 logits [rows, vocab] to `path` as .npy, atomically.
llvm::Error writeLogits(llvm::StringRef path, llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<float> logits) {
  return writeAtomically(path, [&](llvm::raw_ostream &os) { return writeNpyF32(os, path, shape, logits); });
}

llvm::Expected<std::unique_ptr<ir::Module>> loadVerified(std::unique_ptr<llvm::MemoryBuffer> buf) {
  auto m = ir::parseModule(std::move(buf));
  if (!m) return m.takeError();
  if (auto e = ir::verifyModule(**m)) return e;
  return m;
}

llvm::Error writeDump(llvm::StringRef dir, llvm::StringRef file, llvm::StringRef bytes) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, file);
  if (auto ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return ir::makeError("--dump-dir: cannot create '" + llvm::sys::path::parent_path(path) + "': " + ec.message());
  return writeOutput(path, bytes);
}

// "3 tuned (from PATH), 12 default" for the run and build summaries.
// How the decode steps ran: "one persistent kernel (136 tasks) + 2 launches a step", or "136 launches a step"
// with the reason the persistent kernel is not there.
std::string decodeSummary(const Plan &plan, rt::DecodePath path) {
  const PersistentDecode &pd = plan.persistent;
  size_t launches = plan.decode.launches.size();
  if (pd.built() && path == rt::DecodePath::Persistent)
    return "one persistent kernel (" + std::to_string(pd.tasks.size()) + " tasks) + " +
           std::to_string(launches - pd.tasks.size()) + " launches a step";
  return std::to_string(launches) + " launches a step" +
         (pd.built() ? std::string(" (--decode=persistent: one kernel)") : " (no persistent kernel: " + pd.why + ")");
}

std::string tileSummary(const Plan &plan, llvm::StringRef from) {
  std::string s = llvm::formatv("{0} tuned", plan.tunedKernels()).str();
  if (!from.empty()) s += " (from " + from.str() + ")";
  return s + llvm::formatv(", {0} default", plan.defaultTileKernels()).str();
}

// The time of each phase, printed at the end with --time-passes.
cli::PhaseTimes phaseTimes;
const cli::Clock::time_point started = cli::Clock::now();

int finish(int code) {
  if (timePasses) phaseTimes.print(llvm::errs(), msSince(started));
  return code;
}

// The compile pipeline's options from the command line: fusion unless --no-fuse (the module printed to
// stderr after it with --print-after=fuse), the plan sizes, the workers, the dump directory.
PipelineOptions compileOptions() {
  PipelineOptions o;
  o.fuse = !noFuse;
  if (printAfter == PrintAfter::Fuse)
    o.afterPasses = [](const ir::Module &m) {
      llvm::errs() << "// ----- IR after fuse" << (noFuse ? " (--no-fuse: unchanged)" : "") << "\n" << ir::printModule(m);
    };
  o.plan.maxBatch = maxBatch;
  o.plan.maxSeq = maxSeq;
  o.plan.maxPrefillRows = maxPrefill;
  o.plan.weightRing = weightRing;
  o.plan.gainsInWeights = !noGainsInWeights;
  o.plan.gemmFoldsNorm = !noGemmFoldsNorm;
  o.jobs = jobs;
  if (!dumpDir.empty()) o.compile.dumpDir = dumpDir;
  o.progress = cli::compileProgress();
  return o;
}

// A model given on the command line (an .ir file, a bundle or an HF checkpoint directory), loaded by the
// pipeline and run through its passes (fusion unless `fuse` is false; a bundle's IR as it is).
llvm::Expected<std::unique_ptr<ir::Module>> loadModelArg(llvm::StringRef path, bool fuse) {
  PipelineOptions o;
  o.fuse = fuse;
  auto p = Pipeline::load(path, o);
  if (!p) return p.takeError();
  if (auto e = p->runPasses()) return e;
  return p->takeModule();
}

// `minferc model.ir --target sm_XY`: plan, generate, compile (through the cache, in worker processes),
// and write the plan, the sources or a bundle. The pipeline has run its passes.
int compileModule(Pipeline &pipeline) {
  auto t0 = cli::Clock::now();
  if (targetName.empty()) return fail(ir::makeError("--emit=" + std::string(emit == Emit::Plan ? "plan" : emit == Emit::Cuda ? "cuda" : "bundle") +
                                                    " needs --target (one of " + llvm::join(validTargets(), ", ") + ")"));
  auto target = parseTarget(targetName);
  if (!target) return fail(target.takeError());
  // Tuned tiles: the newest tuning database written for this target (by `minferc autotune` on such a GPU).
  pipeline.useNewestTuningFor(*target);
  auto planned = pipeline.plan(*target);
  if (!planned) return fail(planned.takeError());
  const Plan &plan = **planned;
  std::string planText;
  llvm::raw_string_ostream(planText) << llvm::formatv("{0:2}", llvm::json::Value(plan.toJSON())) << "\n";
  phaseTimes.add("plan", msSince(t0), llvm::formatv("{0} kernels", plan.kernels.size()).str());

  auto t1 = cli::Clock::now();
  std::vector<KernelSource> sources = pipeline.sources();
  phaseTimes.add("kernel sources", msSince(t1));
  if (!dumpDir.empty()) {
    if (auto e = writeDump(dumpDir, "module.ir", ir::printModule(pipeline.module()))) return fail(std::move(e));
    if (auto e = writeDump(dumpDir, "plan.json", planText)) return fail(std::move(e));
    for (const KernelSource &s : sources)
      if (auto e = writeDump(dumpDir, "kernels/" + s.name + ".cu", s.text)) return fail(std::move(e));
  }
  if (emit == Emit::Plan || emit == Emit::Cuda) {
    std::string all = planText;
    if (emit == Emit::Cuda) {
      all.clear();
      for (const KernelSource &s : sources) all += "// ===== " + s.name + "\n" + s.text + "\n";
    }
    auto t2 = cli::Clock::now();
    if (auto e = writeOutput(outputPath, all)) return fail(std::move(e));
    phaseTimes.add("write", msSince(t2));
    return finish(0);
  }

  // Bundle: compile every kernel.
  CompileStats stats;
  auto t2 = cli::Clock::now();
  auto compiled = pipeline.compile(*target, &stats);
  if (!compiled) return fail(compiled.takeError());
  cli::addCompileTimes(phaseTimes, stats, msSince(t2));
  if (!dumpDir.empty())
    for (const CompiledKernel &k : *compiled) {
      if (auto e = writeDump(dumpDir, "kernels/" + k.name + ".cubin", llvm::StringRef(k.cubin.data(), k.cubin.size())))
        return fail(std::move(e));
      if (auto e = writeDump(dumpDir, "kernels/" + k.name + ".ptx", k.ptx)) return fail(std::move(e));
    }
  auto t3 = cli::Clock::now();
  if (auto e = writeBundle(outputPath, pipeline.makeBundle(std::move(*compiled)))) return fail(std::move(e));
  phaseTimes.add("write bundle", msSince(t3));
  llvm::errs() << llvm::formatv(
      "minferc: {0} for {1}: {2} kernels ({3} from cache, {4} compiled), decode {5} launches per step "
      "({6} per layer x {7} layers; {13}), prefill {8} launches; weights {9}, {10:f2} GFLOP per decode token; "
      "{11:f2} s; tiles: {12}\n",
      outputPath, target->name, stats.kernels, stats.hits, stats.misses, plan.decode.launches.size(),
      plan.decode.launchesPerLayer, plan.decode.layers, plan.prefill.launches.size(), humanBytes(plan.weightBytes),
      plan.decodeFlopsPerToken / 1e9, msSince(t0) / 1e3, tileSummary(plan, pipeline.tuningFrom()),
      plan.persistent.built() ? "or one persistent kernel of " + std::to_string(plan.persistent.tasks.size()) + " tasks"
                              : "no persistent kernel: " + plan.persistent.why);
  return finish(0);
}

int cacheMain() {
  KernelCache cache = KernelCache::openDefault();
  if (cacheAction == "ls") {
    auto entries = cache.list();
    if (!entries) return fail(entries.takeError());
    uint64_t total = 0;
    size_t invalid = 0;
    llvm::outs() << llvm::formatv("{0,-16}  {1,-7} {2,10}  {3}\n", "KEY", "TARGET", "SIZE", "KERNEL");
    for (const CacheEntryInfo &e : *entries) {
      total += e.bytes;
      invalid += !e.valid;
      llvm::outs() << llvm::formatv("{0,-16}  {1,-7} {2,10}  {3} {4}\n", e.key.substr(0, 16), e.target, humanBytes(e.bytes),
                                    e.kernel, e.valid ? "" : "(invalid: " + e.problem + ")");
    }
    llvm::outs() << entries->size() << " entries, " << humanBytes(double(total)) << " in " << cache.kernelsDir();
    if (invalid) llvm::outs() << " (" << invalid << " invalid: `minferc cache verify` removes them)";
    llvm::outs() << "\n";
    return 0;
  }
  if (cacheAction == "verify") {
    auto report = cache.verify(/*removeBad=*/true);
    if (!report) return fail(report.takeError());
    for (const BadEntry &e : report->bad) {
      if (e.removed) llvm::outs() << "removed " << e.info.key << ": " << e.info.problem << "\n";
      else if (!e.notRemoved.empty())
        llvm::outs() << "not removed " << e.info.key << ": " << e.info.problem << "; " << e.notRemoved << "\n";
      else llvm::outs() << "kept " << e.info.key << ": rewritten meanwhile, now valid\n";
    }
    llvm::outs() << report->valid << " valid entries, " << report->removed << " bad entries removed";
    if (report->notRemoved) llvm::outs() << ", " << report->notRemoved << " could not be removed";
    llvm::outs() << "\n";
    if (report->notRemoved)
      return fail(ir::makeError("cache verify: " + std::to_string(report->notRemoved) +
                                " bad entries could not be removed from " + cache.kernelsDir()));
    return 0;
  }
  if (cacheAction == "clear") {
    if (auto e = cache.clear()) return fail(std::move(e));
    llvm::outs() << "cleared " << cache.kernelsDir() << "\n";
    return 0;
  }
  return fail(ir::makeError("minferc cache: expected ls, verify or clear, got '" + cacheAction + "'"));
}

int compileMain() {
  if (inputPath.empty()) return fail(ir::makeError("no input file; see minferc --help"));
  // Everything that can be refused without work is, before the model is read.
  bool wantsTarget = emit.getNumOccurrences() ? emit != Emit::IR : !targetName.empty();
  if (!targetName.empty())
    if (auto target = parseTarget(targetName); !target) return fail(target.takeError());
  if (wantsTarget && emit != Emit::Plan && emit != Emit::Cuda && outputPath == "-")
    return fail(ir::makeError("a bundle is binary: give it a file with -o model.mfb"));
  if (auto e = cli::checkOutputPath(outputPath, "-o")) return fail(std::move(e));
  auto t0 = cli::Clock::now();
  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(inputPath, /*IsText=*/true);
  if (!buf) return fail(ir::makeError("cannot read '" + inputPath + "': " + buf.getError().message()));
  if (!splitInput) {
    auto m = loadVerified(std::move(*buf));
    if (!m) return fail(m.takeError());
    phaseTimes.add("parse", msSince(t0), "read, parsed and verified");
    // --emit=ir writes the module as read; --print-after=fuse prints the pass's result besides.
    std::string text = wantsTarget ? "" : ir::printModule(**m);
    if (wantsTarget || printAfter == PrintAfter::Fuse) {
      auto t1 = cli::Clock::now();
      Pipeline pipeline = Pipeline::fromModule(std::move(*m), compileOptions());
      if (auto e = pipeline.runPasses()) return fail(std::move(e));
      phaseTimes.add("fuse", msSince(t1), noFuse ? "--no-fuse: skipped" : "");
      if (wantsTarget) return compileModule(pipeline);
    }
    auto t2 = cli::Clock::now();
    if (auto e = writeOutput(outputPath, text)) return fail(std::move(e));
    phaseTimes.add("write", msSince(t2));
    return finish(0);
  }
  // Each chunk keeps its line numbers: it is parsed with as many newlines in front as lines came before.
  llvm::StringRef rest = (*buf)->getBuffer();
  std::string out;
  bool anyFailed = false;
  size_t linesBefore = 0;
  while (true) {
    size_t sep = std::string::npos, search = 0;
    while ((search = rest.find("// -----", search)) != llvm::StringRef::npos) {
      if (search == 0 || rest[search - 1] == '\n') {
        sep = search;
        break;
      }
      search += 1;
    }
    llvm::StringRef chunk = rest.substr(0, sep);
    auto m = loadVerified(llvm::MemoryBuffer::getMemBufferCopy(std::string(linesBefore, '\n') + chunk.str(),
                                                               (*buf)->getBufferIdentifier()));
    if (m) {
      out += (out.empty() ? "" : "// -----\n") + ir::printModule(**m);
      if (printAfter == PrintAfter::Fuse) // each chunk through the pass, printed to stderr
        if (llvm::Error e = Pipeline::fromModule(std::move(*m), compileOptions()).runPasses()) {
          llvm::errs() << ir::renderError(std::move(e), "minferc");
          anyFailed = true;
        }
    } else {
      llvm::errs() << ir::renderError(m.takeError(), "minferc");
      anyFailed = true;
    }
    if (sep == std::string::npos) break;
    linesBefore += chunk.count('\n');
    rest = rest.substr(sep);
    size_t eol = rest.find('\n');
    linesBefore += eol == llvm::StringRef::npos ? 0 : 1;
    rest = eol == llvm::StringRef::npos ? llvm::StringRef() : rest.substr(eol + 1);
  }
  if (auto e = writeOutput(outputPath, out)) return fail(std::move(e));
  return finish(anyFailed ? 1 : 0);
}

int importMain() {
  if (auto e = cli::checkOutputPath(outputPath, "-o")) return fail(std::move(e));
  auto m = importHF(importDir);
  if (!m) return fail(m.takeError());
  if (auto e = writeOutput(outputPath, ir::printModule(**m))) return fail(std::move(e));
  return 0;
}

// Comma-separated ids (of the option `flag`, for messages), each below `vocab`.
llvm::Expected<std::vector<int32_t>> parseIds(llvm::StringRef text, int64_t vocab,
                                              llvm::StringRef flag = "--prompt-ids") {
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  std::vector<int32_t> ids;
  for (llvm::StringRef p : parts) {
    int64_t v = 0;
    if (p.trim().getAsInteger(10, v))
      return ir::makeError(flag + ": '" + p.trim() + "' is not an integer; expected ids like 1,2,3");
    if (v < 0 || v >= vocab)
      return ir::makeError(flag + ": token id " + std::to_string(v) + " is outside the vocabulary [0, " +
                           std::to_string(vocab) + ")");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty() || text.trim().empty()) return ir::makeError(flag + ": expected at least one token id");
  return ids;
}

int tokenizeMain() {
  auto tok = tok::loadTokenizer(tokenizeDir);
  if (!tok) return fail(tok.takeError());
  auto ids = (*tok)->encode(tokenizeText);
  if (!ids) return fail(ir::makeError("--text: " + llvm::toString(ids.takeError())));
  llvm::outs() << llvm::join(llvm::map_range(*ids, [](int32_t t) { return std::to_string(t); }), ",") << "\n";
  return 0;
}

int detokenizeMain() {
  auto tok = tok::loadTokenizer(tokenizeDir);
  if (!tok) return fail(tok.takeError());
  auto ids = parseIds(detokenizeIds, (*tok)->vocabSize(), "--ids");
  if (!ids) return fail(ids.takeError());
  auto text = (*tok)->decode(*ids);
  if (!text) return fail(text.takeError());
  llvm::outs() << *text << "\n";
  return 0;
}

// The prompt of `minferc run`: --prompt-ids as given, or --prompt's text through the checkpoint's tokenizer
// (then `tokenizer` holds it, for streaming the answer).
struct Prompt {
  std::vector<int32_t> ids;
  std::unique_ptr<tok::Tokenizer> tokenizer;
};

llvm::Expected<Prompt> readPrompt() {
  if (promptText.getNumOccurrences() == promptIds.getNumOccurrences())
    return ir::makeError("run: give the prompt as --prompt TEXT or as --prompt-ids 1,2,3 (one of them)");
  Prompt p;
  if (promptIds.getNumOccurrences()) {
    auto ids = parseIds(promptIds, INT32_MAX); // the syntax now; the range once the model's vocabulary is known
    if (!ids) return ids.takeError();
    p.ids = std::move(*ids);
    return p;
  }
  std::string dir = tokenizerPath;
  if (dir.empty()) dir = llvm::sys::fs::is_directory(runModel) ? runModel.getValue() : weightsPath.getValue();
  if (dir.empty() || !llvm::sys::fs::is_directory(dir))
    return ir::makeError("--prompt: no tokenizer directory; MODEL is a file, so give --tokenizer DIR");
  auto t = tok::loadTokenizer(dir);
  if (!t) return t.takeError();
  auto ids = (*t)->encodePrompt(promptText);
  if (!ids) return ir::makeError("--prompt: " + llvm::toString(ids.takeError()));
  if (ids->empty()) return ir::makeError("--prompt: the text gives no tokens");
  p.ids = std::move(*ids);
  p.tokenizer = std::move(*t);
  return p;
}

// A tokenizer with ids the model has no embedding for would feed it out-of-range ids.
llvm::Error checkVocab(const Prompt &p, int64_t modelVocab) {
  if (p.tokenizer && p.tokenizer->vocabSize() > modelVocab)
    return ir::makeError("the tokenizer (" + p.tokenizer->describe() + ") has " +
                         std::to_string(p.tokenizer->vocabSize()) + " tokens but the model's vocabulary has " +
                         std::to_string(modelVocab));
  for (int32_t id : p.ids)
    if (id >= modelVocab)
      return ir::makeError("--prompt-ids: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                           std::to_string(modelVocab) + ")");
  return llvm::Error::success();
}

// Prints sequence 0's text as its tokens arrive (nothing for the others, which print at the end).
class Streamer {
public:
  explicit Streamer(const tok::Tokenizer &t) : stream(t) {}
  void push(int32_t id) {
    auto piece = stream.push(id);
    if (piece) llvm::outs() << *piece;
    else llvm::consumeError(piece.takeError()); // the model's id, checked against the vocabulary already
    llvm::outs().flush();
  }
  void finish() {
    auto rest = stream.finish();
    if (rest) llvm::outs() << *rest;
    else llvm::consumeError(rest.takeError());
    llvm::outs() << "\n";
  }

private:
  tok::TextStream stream;
};

std::string idList(const std::vector<int32_t> &ids) {
  return llvm::join(llvm::map_range(ids, [](int32_t t) { return std::to_string(t); }), ",");
}

// The text of a whole generated sequence, its EOS left out.
void printText(const tok::Tokenizer &t, std::vector<int32_t> ids) {
  if (!ids.empty() && t.special.isEos(ids.back())) ids.pop_back();
  auto text = t.decode(ids);
  if (text) llvm::outs() << *text << "\n";
  else llvm::consumeError(text.takeError());
}

// `minferc run --backend=gpu`: Engine (bundle, IR or checkpoint) + Session, timings on stderr.
int runGpu() {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  if (runBatch < 1) return fail(ir::makeError("--batch must be at least 1"));
  if (maxNewTokens < 0 || maxNewTokens > ir::limits::kMaxNewTokens)
    return fail(ir::makeError("--max-new-tokens must be in 0.." + std::to_string(ir::limits::kMaxNewTokens)));
  // The prompt before loading the model (the ids' range needs the model's vocabulary).
  auto prompt = readPrompt();
  if (!prompt) return fail(prompt.takeError());
  if (!stopIds.empty())
    if (auto ids = parseIds(stopIds, INT32_MAX, "--stop-ids"); !ids) return fail(ids.takeError());
  rt::EngineOptions eo;
  eo.weights = weightsPath;
  eo.target = runTarget;
  eo.plan.maxBatch = runBatch;
  eo.plan.maxSeq = runMaxSeq;
  eo.plan.weightRing = runWeightRing;
  eo.plan.gainsInWeights = !runNoGainsInWeights;
  eo.plan.gemmFoldsNorm = !runNoGemmFoldsNorm;
  eo.fuse = !runNoFuse;
  eo.compileProgress = cli::compileProgress();
  // The checks that need the model but no GPU (ids against its vocabulary) before the driver is loaded; then
  // the driver, so that its absence comes with what to do instead.
  bool noDriver = false;
  eo.checkModel = [&](const ir::Module &m) -> llvm::Error {
    int64_t vocab = *m.value(m.outputs[0]).type.lastDim();
    if (auto e = checkVocab(*prompt, vocab)) return e;
    if (!stopIds.empty())
      if (auto ids = parseIds(stopIds, vocab, "--stop-ids"); !ids) return ids.takeError();
    llvm::Error e = cuda::init();
    noDriver = bool(e);
    return e;
  };
  auto engine = rt::Engine::load(runModel, eo);
  if (!engine) {
    int code = fail(engine.takeError());
    if (noDriver)
      cli::note("without a GPU, `minferc run --backend=reference` runs the model on the CPU reference interpreter "
                "(greedy, batch 1)");
    return code;
  }
  auto t1 = Clock::now();
  rt::GenerateOptions go;
  go.maxNewTokens = maxNewTokens;
  go.temperature = temperature;
  go.topK = topK;
  go.topP = topP;
  go.seed = seed;
  go.graph = !noGraph;
  go.decode = decodePath;
  if (!stopIds.empty()) {
    auto stops = parseIds(stopIds, (*engine)->vocab(), "--stop-ids");
    if (!stops) return fail(stops.takeError());
    go.stopTokens = *stops;
  }
  std::optional<Streamer> streamer;
  if (prompt->tokenizer) {
    if (stopIds.empty()) go.stopTokens = prompt->tokenizer->special.eos;
    streamer.emplace(*prompt->tokenizer);
    go.onToken = [&](int64_t sequence, int32_t token) {
      if (sequence == 0 && !prompt->tokenizer->special.isEos(token)) streamer->push(token);
      return true;
    };
  }
  rt::SessionOptions so;
  so.keepLogits = !logitsOut.empty();
  auto session = rt::Session::create(**engine, so);
  if (!session) return fail(session.takeError());
  double sessionMs = msSince(t1);
  auto gen = (*session)->generate(std::vector<std::vector<int32_t>>(runBatch, prompt->ids), go);
  if (!gen) return fail(gen.takeError());
  auto t2 = Clock::now();
  if (!logitsOut.empty()) {
    int64_t vocab = (*engine)->vocab();
    int64_t rows = static_cast<int64_t>(gen->logits[0].size()) / vocab;
    if (auto e = writeLogits(logitsOut, {rows, vocab}, gen->logits[0])) return fail(std::move(e));
  }
  if (streamer) {
    streamer->finish();
    for (size_t b = 1; b < gen->tokens.size(); ++b) printText(*prompt->tokenizer, gen->tokens[b]);
  } else {
    for (const auto &t : gen->tokens) llvm::outs() << idList(t) << "\n";
  }
  const rt::LoadStats &st = (*engine)->stats();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  double prefillTokS = gen->prefillMs > 0 ? gen->promptTokens / (gen->prefillMs / 1e3) : 0;
  double msPerToken = gen->decodeSteps ? gen->decodeMs / gen->decodeSteps : 0;
  llvm::errs() << llvm::formatv(
      "minferc run: backend=gpu on {0} ({1}), model from {2}{21}\n"
      "  load {3:f0} ms: parse+plan+checks {4:f0} ms, kernels {5:f0} ms ({6} kernels: {7}), modules {8:f0} ms, "
      "weights {9:f0} ms ({10})\n"
      "  prefill {11} tokens in {12:f2} ms ({13:f0} tok/s, first token included); decode {14} steps x batch {15}: "
      "{16:f3} ms/token ({17:f0} tok/s){18}; session memory {19}; total {20:f0} ms\n",
      (*engine)->device().name, (*engine)->plan().target.name, st.source, ms(t1 - t0), st.parseMs, st.compileMs,
      (*engine)->plan().kernels.size(),
      st.source == "bundle" ? std::string("from the bundle")
                            : llvm::formatv("{0} cached, {1} compiled", st.compile.hits, st.compile.misses).str(),
      st.modulesMs, st.weightsMs, humanBytes(double(st.weightBytes)), gen->promptTokens, gen->prefillMs, prefillTokS,
      gen->decodeSteps, runBatch.getValue(), msPerToken, msPerToken > 0 ? 1e3 * runBatch / msPerToken : 0.0,
      go.graph ? ", CUDA graph" : "", humanBytes(double((*session)->memory().total())), ms(t2 - t0),
      llvm::formatv(", {0}, decode: {1}; tiles: {2}", st.fused ? "fused" : "unfused",
                    decodeSummary((*engine)->plan(), go.decode), tileSummary((*engine)->plan(), st.tuningDb)).str());
  if (!st.warning.empty()) cli::warn(st.warning);
  phaseTimes.add("parse", st.loadMs, "model read (" + st.source + ")");
  phaseTimes.add("fuse", st.passesMs, st.fused ? "" : "not run");
  phaseTimes.add("weights check", st.checkMs, "every weight in the checkpoint, dtype and shape");
  phaseTimes.add("plan", st.planMs);
  if (st.source != "bundle") cli::addCompileTimes(phaseTimes, st.compile, st.compileMs); // a bundle's are in parse
  phaseTimes.add("module load", st.modulesMs, llvm::formatv("{0} modules", (*engine)->plan().kernels.size()).str());
  phaseTimes.add("weights", st.weightsMs, humanBytes(double(st.weightBytes)) + " to the device");
  phaseTimes.add("setup", st.weightsSetupMs, "checkpoint opened, device memory, page-locked staging", /*depth=*/1);
  phaseTimes.add("read", st.weightsReadMs, "checkpoint into the staging buffers (f16 converted there)", /*depth=*/1);
  phaseTimes.add("copy wait", st.weightsWaitMs, "for the copy engine", /*depth=*/1);
  phaseTimes.add("session", sessionMs, "KV cache and arenas");
  phaseTimes.add("prefill", gen->prefillMs,
                 llvm::formatv("{0} tokens, first token included (GPU time)", gen->promptTokens).str());
  phaseTimes.add("decode", gen->decodeMs, llvm::formatv("{0} steps (GPU time)", gen->decodeSteps).str());
  return finish(0);
}

int runMain() {
  if (!logitsOut.empty())
    if (auto e = cli::checkOutputPath(logitsOut, "--logits-out")) return fail(std::move(e));
  if (weightsPath.empty() && !llvm::sys::fs::is_directory(runModel) && llvm::sys::fs::exists(runModel))
    return fail(ir::makeError("model '" + runModel + "' is " +
                              (isBundleFile(runModel) ? "a bundle" : "an IR file") + "; give its weights with --weights PATH"));
  if (backend == Backend::Gpu) return runGpu();
  for (const cl::Option *o : std::initializer_list<const cl::Option *>{&runBatch, &temperature, &topK, &topP, &seed,
                                                                       &stopIds, &noGraph, &runTarget, &runMaxSeq})
    if (o->getNumOccurrences())
      return fail(ir::makeError("--" + o->ArgStr + " needs --backend=gpu (the reference backend is greedy, batch 1)"));
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  bool isDir = llvm::sys::fs::is_directory(runModel);
  // The reference interpreter runs the module as written (it defines fused ops too, but needs no fusion).
  auto loaded = loadModelArg(runModel, /*fuse=*/false);
  if (!loaded) return fail(loaded.takeError());
  phaseTimes.add("parse", msSince(t0), "model read, not fused");
  std::unique_ptr<ir::Module> module = std::move(*loaded);
  std::string wpath = weightsPath.empty() ? (isDir ? runModel.getValue() : std::string()) : weightsPath.getValue();
  if (wpath.empty()) return fail(ir::makeError("model '" + runModel + "' is an IR file; give its weights with --weights PATH"));
  if (maxNewTokens < 0 || maxNewTokens > ir::limits::kMaxNewTokens)
    return fail(ir::makeError("--max-new-tokens must be in 0.." + std::to_string(ir::limits::kMaxNewTokens)));

  int64_t vocab = *module->value(module->outputs[0]).type.lastDim();
  auto prompt = readPrompt();
  if (!prompt) return fail(prompt.takeError());
  if (auto e = checkVocab(*prompt, vocab)) return fail(std::move(e));
  const std::vector<int32_t> *ids = &prompt->ids;
  // The interpreter would go on past the positions the model was trained for; the GPU plan refuses them.
  if (const ir::DimDecl *maxPos = module->findDim("max_pos"))
    if (int64_t need = static_cast<int64_t>(ids->size()) + std::max<int64_t>(maxNewTokens - 1, 0); need > maxPos->value)
      return fail(ir::makeError("the prompt (" + std::to_string(ids->size()) + " tokens) and --max-new-tokens " +
                                std::to_string(maxNewTokens) + " need " + std::to_string(need) +
                                " positions, more than the model's max_pos " + std::to_string(maxPos->value)));
  auto tw = Clock::now();
  auto ckpt = Checkpoint::open(wpath);
  if (!ckpt) return fail(ckpt.takeError());
  auto weights = loadWeightsF32(*module, *ckpt);
  if (!weights) return fail(weights.takeError());
  auto t1 = Clock::now();
  phaseTimes.add("weights", msSince(tw), "read as fp32");

  int64_t maxSeq = static_cast<int64_t>(ids->size()) + std::max<int64_t>(maxNewTokens, 1);
  auto interp = ir::Interpreter::create(*module, *weights, /*batch=*/1, maxSeq);
  if (!interp) return fail(interp.takeError());
  std::optional<Streamer> streamer;
  if (prompt->tokenizer) streamer.emplace(*prompt->tokenizer);
  std::optional<Clock::time_point> firstToken;
  auto result = ir::generateGreedy(**interp, {*ids}, maxNewTokens, std::nullopt, [&](int64_t, int32_t token) {
    if (!firstToken) firstToken = Clock::now();
    if (!streamer) return true;
    if (prompt->tokenizer->special.isEos(token)) return false;
    streamer->push(token);
    return true;
  });
  if (!result) return fail(result.takeError());
  auto t2 = Clock::now();

  if (!logitsOut.empty()) {
    const ir::Tensor &l = result->logits[0];
    if (auto e = writeLogits(logitsOut, l.shape, l.data)) return fail(std::move(e));
  }
  if (streamer) streamer->finish();
  else llvm::outs() << idList(result->tokens[0]) << "\n";
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  llvm::errs() << llvm::format("minferc run: backend=reference load %.0f ms, %zu prompt + %zu generated tokens in %.0f ms\n",
                               ms(t1 - t0), ids->size(), result->tokens[0].size(), ms(t2 - t1));
  Clock::time_point prefilled = firstToken.value_or(t2);
  phaseTimes.add("prefill", ms(prefilled - t1), llvm::formatv("{0} tokens, to the first token", ids->size()).str());
  size_t decoded = std::max<size_t>(result->tokens[0].size(), 1) - 1; // the first token came from the prefill
  phaseTimes.add("decode", ms(t2 - prefilled), llvm::formatv("{0} tokens", decoded).str());
  return finish(0);
}

} // namespace

// `minferc autotune --show`: every database in the tuning directory, entry by entry.
int autotuneShow() {
  std::string dir = TuningDb::directory(KernelCache::openDefault().dir());
  std::error_code ec;
  int found = 0;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    if (llvm::StringRef(it->path()).endswith(".json")) paths.push_back(it->path());
  std::sort(paths.begin(), paths.end());
  for (const std::string &path : paths) {
    auto db = TuningDb::read(path);
    if (!db) {
      llvm::outs() << path << ": unreadable (" << llvm::toString(db.takeError()) << ")\n";
      continue;
    }
    ++found;
    llvm::outs() << llvm::formatv("{0}: {1} ({2} SMs, {3}, driver {4}, NVRTC {5}), {6} entries\n", path, db->device.name,
                                  db->device.smCount, db->device.target(), db->device.driverVersion,
                                  db->device.nvrtcVersion, db->entries.size());
    for (const auto &[key, e] : db->entries)
      llvm::outs() << llvm::formatv("  {0,-90} {1,-22} {2,8:f2} us", key, e.tile, e.us)
                   << (e.defaultUs > 0 ? llvm::formatv("  (default {0} {1:f2} us, {2:f2}x)", e.defaultTile, e.defaultUs,
                                                       e.defaultUs / e.us).str()
                                       : std::string())
                   << (e.stepMs > 0 ? llvm::formatv("  [in the step: {0:f3} ms{1}]", e.stepMs,
                                                    e.kernelTile.empty() ? std::string()
                                                                         : ", kept over " + e.kernelTile).str()
                                    : std::string())
                   << "\n";
  }
  if (!found) llvm::outs() << "no tuning databases in " << dir << " (run `minferc autotune MODEL` on a GPU)\n";
  return 0;
}

// `minferc autotune MODEL`: tune on this GPU, with a progress bar on a terminal and plain lines otherwise.
int autotuneMain() {
  if (tuneShow) return autotuneShow();
  if (tuneModel.empty()) return fail(ir::makeError("minferc autotune: give a model (an .ir file, a bundle or a checkpoint dir), or --show"));
  if (tuneWeights.getNumOccurrences() && !tuneInStep)
    return fail(ir::makeError("minferc autotune: --weights is for --in-step (the per-kernel timing needs no weights)"));
  if (tuneContext.getNumOccurrences() && !tuneInStep)
    return fail(ir::makeError("minferc autotune: --in-step-context is for --in-step (the per-kernel timing runs no attention)"));
  if (tuneContext < 1)
    return fail(ir::makeError("minferc autotune: --in-step-context must be at least 1 token, got " + std::to_string(tuneContext)));
  if (tuneInStep && isBundleFile(tuneModel))
    return fail(ir::makeError("minferc autotune --in-step: '" + tuneModel + "' is a bundle; its tiles are fixed when it is "
                              "built, so tune the .ir file or checkpoint it came from"));
  // An IR file without --weights: the step runs on synthetic weights (pseudo-random, of an initialised model's size).
  const bool synthetic =
      tuneInStep && tuneWeights.empty() && !llvm::sys::fs::is_directory(tuneModel) && llvm::sys::fs::exists(tuneModel);
  auto loaded = loadModelArg(tuneModel, /*fuse=*/!tuneNoFuse);
  if (!loaded) return fail(loaded.takeError());
  std::unique_ptr<ir::Module> m = std::move(*loaded);
  rt::AutotuneOptions opts;
  if (!tuneBuckets.empty()) {
    opts.buckets.assign(tuneBuckets.begin(), tuneBuckets.end());
    for (const std::string &b : opts.buckets)
      if (!isTuningBucket(b))
        return fail(ir::makeError("--buckets: unknown bucket '" + b + "'; expected any of " + llvm::join(allTuningBuckets(), ", ")));
  }
  opts.jobs = tuneJobs;
  opts.retune = tuneRetune;
  auto fp = rt::deviceFingerprint();
  if (!fp) return fail(fp.takeError());
  std::string path = TuningDb::pathFor(KernelCache::openDefault().dir(), *fp);
  std::string warning;
  TuningDb db = TuningDb::load(path, *fp, &warning);
  if (!warning.empty()) cli::warn(warning);
  cli::Progress progress("autotune");
  opts.progress = [&](const rt::AutotuneProgress &p) {
    std::string best = p.done ? llvm::formatv("best {0} {1:f2} us (default {2} {3:f2} us)", p.bestTile, p.bestUs,
                                              p.defaultTile, p.defaultUs).str()
                              : llvm::formatv("timing {0} tiles", p.candidates).str();
    std::string left = p.index > 1 || p.done ? llvm::formatv(", ~{0:f0} s left", p.secondsLeft).str() : "";
    progress.update(p.index, p.total, p.kernel, best + left, p.done);
  };
  llvm::errs() << "minferc autotune: " << fp->id() << ", buckets " << llvm::join(opts.buckets, ",") << "\n";
  auto report = rt::autotune(*m, db, opts);
  if (!report) return fail(report.takeError());
  if (auto e = db.save(path)) return fail(std::move(e));
  std::string stale =
      report->stale
          ? llvm::formatv(", {0} of them because their default tile or its step neighbours have changed since", report->stale).str()
          : "";
  llvm::errs() << llvm::formatv("minferc autotune: {0} kernels ({1} tuned now{8}, {2} already in the database), {3} "
                                "candidates timed ({4} failed); compile {5:f1} s, timing {6:f1} s; wrote {7}\n",
                                report->kernels, report->tuned, report->skipped, report->candidates, report->failed,
                                report->compileSeconds, report->timeSeconds, path, stale);
  if (!tuneInStep) {
    if (llvm::any_of(opts.buckets, [](const std::string &b) { return llvm::StringRef(b).startswith("decode"); }))
      cli::warn("the decode buckets' tiles were timed kernel by kernel, which can pick tiles that make the decode step "
                "slower (Llama-2-7B on an H200: 3.71 ms a step against 3.55 with the defaults); --in-step checks them "
                "in the step");
    return 0;
  }
  rt::StepTuneOptions so;
  so.model = tuneModel;
  so.engine.weights = tuneWeights;
  so.engine.syntheticWeights = synthetic;
  if (synthetic)
    llvm::errs() << "minferc autotune --in-step: no --weights for '" << tuneModel
                 << "': the step runs on synthetic weights (pseudo-random, within +-0.035)\n";
  so.engine.fuse = !tuneNoFuse;
  so.engine.jobs = tuneJobs;
  so.buckets = opts.buckets;
  so.context = tuneContext;
  so.log = [](const std::string &line) { llvm::errs() << "minferc autotune --in-step: " << line << "\n"; };
  auto stepReport = rt::tuneInStep(*m, db, so);
  if (!stepReport) return fail(stepReport.takeError());
  if (auto e = db.save(path)) return fail(std::move(e));
  llvm::errs() << llvm::formatv("minferc autotune --in-step: {0} buckets, {1} configurations timed, {2} kernels moved to "
                                "their default or a runner-up tile; wrote {3}\n",
                                stepReport->buckets, stepReport->timed, stepReport->moved, path);
  return 0;
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  timingsAlias.setHiddenFlag(cl::NotHidden); // an alias keeps no category of its own for the line above
  cl::SetVersionPrinter(cli::printVersion);
  cli::enumOption(emit);
  cli::enumOption(printAfter);
  cli::enumOption(backend);
  if (!cli::parseCommandLine(argc, argv,
                             "minfer: a JIT kernel-generation compiler for decoder-only LLMs\n\n"
                             "  minferc model.ir [--emit=ir] [-o FILE]\n"
                             "  minferc model.ir --target sm_89 -o model.mfb [--emit=plan|cuda] [--dump-dir DIR] [-j N]\n"
                             "  minferc model.ir [--target sm_89] --print-after=fuse [--no-fuse]\n"
                             "  minferc cache ls|verify|clear\n"
                             "  minferc autotune MODEL [--buckets decode:1,prefill:513-2048] [--retune] [-j N] [--in-step [--weights W] [--in-step-context N]] | --show\n"
                             "  minferc import-hf DIR -o model.ir\n"
                             "  minferc tokenize DIR --text TEXT\n"
                             "  minferc detokenize DIR --ids 1,2,3\n"
                             "  minferc run MODEL --prompt TEXT | --prompt-ids 1,2,3 [--max-new-tokens N] [--batch B] [--temperature T]\n"
                             "              [--top-k K] [--top-p P] [--seed S] [--logits-out F.npy] [--no-fuse]\n"
                             "              [--backend=gpu|reference]\n"
                             "  --time-passes (or --timings) on a compile or a run: where the time went\n"))
    return 1;
  if (importCmd) return importMain();
  if (runCmd) return runMain();
  if (tokenizeCmd) return tokenizeMain();
  if (detokenizeCmd) return detokenizeMain();
  if (cacheCmd) return cacheMain();
  if (autotuneCmd) return autotuneMain();
  return compileMain();
}
