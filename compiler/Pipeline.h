// compiler/Pipeline.h — the one way a model is built, by the Engine and by every `minferc` subcommand:
//
//   load (an .ir file, a bundle, or an HF checkpoint directory) → passes (fusion) → tuning database →
//   plan → kernel sources → compiled kernels (through the disk cache, in worker processes; a bundle's own)
//
// Each step is a method, called in that order; a caller stops where it has what it needs (`minferc
// --emit=ir` after the passes, `--emit=plan` after the plan, the reference backend after the load). Nothing
// here needs a GPU: where the runtime knows the device, it hands the pipeline the device's tuning database.
#pragma once

#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "ir/Module.h"
#include "jit/Bundle.h"
#include "jit/KernelCache.h"
#include "jit/Nvrtc.h"
#include "jit/ParallelCompile.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace minfer {

struct PipelineOptions {
  bool fuse = true; // the fusion pass (a bundle's IR is already what its plan was built from)
  // Called with the module after the passes (minferc --print-after=fuse).
  std::function<void(const ir::Module &)> afterPasses;
  PlanOptions plan; // the session sizes; a bundle's own replace them (`tuning` is set by the pipeline)
  unsigned jobs = 0;    // compile workers (0: the cores)
  bool cache = true;    // false: compile in this process, without the disk cache
  CompileOptions compile;
  CompileProgressFn progress; // called as each kernel is compiled (minferc's progress bar)
};

class Pipeline {
public:
  enum class Source { Ir, Bundle, Checkpoint };

  // Step 1. The model at `path`: an .ir file (parsed and verified), a bundle (its IR; its plan's sizes and
  // tuned tiles are used from here on) or an HF checkpoint directory (imported). Errors name the file.
  static llvm::Expected<Pipeline> load(llvm::StringRef path, PipelineOptions options = {});
  // The same from a module the caller parsed itself (minferc reads standard input and split files).
  static Pipeline fromModule(std::unique_ptr<ir::Module> module, PipelineOptions options = {});

  // Step 2. The passes: fusion unless options.fuse is off or the model is a bundle.
  llvm::Error runPasses();

  // Step 3. Tuned tiles: a database to plan with, and where it came from (shown to the user). A bundle
  // brings its own and ignores these. Without one, every tile is the heuristic default.
  void useTuning(TuningDb db, std::string from);
  // The newest database written for `target` under the cache (a bundle build on a machine without a GPU).
  void useNewestTuningFor(const Target &target);

  // Step 4. The launch plan for `target`.
  llvm::Expected<const Plan *> plan(const Target &target);

  // Step 5. Every kernel of the plan: its source, and compiled (from the bundle when the model is one;
  // otherwise through the disk cache in options.jobs workers). In plan kernel order.
  std::vector<KernelSource> sources() const;
  llvm::Expected<std::vector<CompiledKernel>> compile(const Target &target, CompileStats *stats = nullptr);

  // A bundle of the planned and compiled model (minferc -o model.mfb).
  Bundle makeBundle(std::vector<CompiledKernel> compiled) const;

  ir::Module &module() { return *module_; }
  const ir::Module &module() const { return *module_; }
  std::unique_ptr<ir::Module> takeModule() { return std::move(module_); }
  Source source() const { return source_; }
  llvm::StringRef sourceName() const; // "ir", "bundle" or "checkpoint"
  bool fused() const { return fused_; }
  const Bundle *bundle() const { return bundle_ ? &*bundle_ : nullptr; }
  const std::string &tuningFrom() const { return tuningFrom_; } // "" (none), a path, or "bundle"
  Plan takePlan() { return std::move(*plan_); }

private:
  Pipeline(std::unique_ptr<ir::Module> m, Source s, PipelineOptions o)
      : module_(std::move(m)), source_(s), options_(std::move(o)) {}

  std::unique_ptr<ir::Module> module_;
  Source source_;
  PipelineOptions options_;
  std::string path_;
  std::optional<Bundle> bundle_;
  bool fused_ = false;
  std::optional<TuningDb> tuning_;
  std::string tuningFrom_;
  std::optional<Plan> plan_;
};

} // namespace minfer
