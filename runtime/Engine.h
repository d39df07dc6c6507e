// runtime/Engine.h — a model ready to run on the GPU: its plan, its kernels loaded, its weights on the device.
//
// Engine::load takes what a user has: an .ir file (weights from --weights), a bundle from
// `minferc --target ... -o model.mfb` (kernels precompiled: no NVRTC call), or a Hugging Face checkpoint
// directory (config.json imported, weights found in it). Everything that can be checked without a GPU is
// checked first — the model parses and verifies, the plan fits, every weight is in the checkpoint with its
// dtype and shape, a bundle is intact and built for the target — so bad input fails fast with its own
// message, and only then is the driver touched. Kernels are compiled through the disk cache in worker
// processes; every module is loaded before any session can capture a graph. Weights stream from the mapped
// safetensors files to one device allocation in bounded chunks (converted to the dtype and layout the
// kernels read on the way), so the host never holds a copy of the model.
//
// Sessions (runtime/Session.h) share an engine's kernels and weights; each owns its KV cache and arenas.
#pragma once

#include "jit/ParallelCompile.h"
#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "jit/Target.h"
#include "ir/Module.h"
#include "runtime/Driver.h"

#include "llvm/Support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace minfer::rt {

class Engine;

struct EngineOptions {
  // Weights: a .safetensors file, a model.safetensors.index.json, or a directory holding them. Empty: the
  // model itself when it is a checkpoint directory (an .ir file or a bundle needs one).
  std::string weights;
  // The GPU architecture to compile for and to expect. Empty: the device's own. Given, the device must
  // match it (checked once the driver is up); everything before the driver is checked without a GPU.
  std::string target;
  PlanOptions plan;       // sizes of the sessions (batch, max_seq, prefill rows); a bundle's own are fixed
  unsigned jobs = 0;      // compile workers (0: the cores)
  bool cache = true;      // false: compile without the disk cache (MINFER_NO_CACHE does the same)
  bool fuse = true;       // run the fusion pass on an .ir file or a checkpoint (a bundle is planned as built)
  bool tuned = true;      // use the device's tuning database (runtime/Autotune.h) where it has an entry
  // With `tuned`: this database instead of the device's file (the in-step tuner loads each configuration it
  // times this way). It must be the device's: the plan trusts its tiles as the file's.
  std::optional<TuningDb> tuning;
  size_t uploadChunkBytes = 64u << 20; // host staging per weight-upload step
  // No checkpoint: every weight is filled on the device with pseudo-random values within +-0.035 (random, as
  // real weights are to a tensor core's power draw), for timing a model whose weights are not at hand (minferc
  // autotune --in-step without --weights). The step runs the same kernels on as many bytes as with real
  // weights; its outputs mean nothing.
  bool syntheticWeights = false;
  // Another engine whose weights this one may share instead of loading them: taken where its plan holds every
  // weight and constant buffer exactly as this one's (the same model, options and layouts; tiles may differ),
  // else the weights load as without it. Only read during load: the device memory is shared, so either engine
  // may be freed first. The in-step tuner loads each configuration it times this way.
  const Engine *weightsFrom = nullptr;
  // Called with the module once everything without a GPU is checked and before the driver is touched, so
  // a caller's own cheap checks (minferc: prompt ids against the vocabulary) fail before the expensive ones.
  std::function<llvm::Error(const ir::Module &)> checkModel;
  CompileProgressFn compileProgress; // called as each kernel is compiled (minferc's progress bar)
};

// What loading took, for `minferc run` and the benchmarks.
struct LoadStats {
  std::string source;       // "ir", "bundle" or "checkpoint"
  bool fused = true;        // the fusion pass ran
  double parseMs = 0;       // model parsed, verified, planned; weights checked (the four below, and the target)
  double loadMs = 0;        //   the model read: parsed and verified, imported, or a bundle checked
  double passesMs = 0;      //   the fusion pass
  double checkMs = 0;       //   every weight found in the checkpoint with its dtype and shape
  double planMs = 0;        //   the launch plan
  double compileMs = 0;     // kernels compiled or read from the cache (0 for a bundle)
  CompileStats compile;     // hits, misses, workers
  double modulesMs = 0;     // cubins loaded into the driver
  double weightsMs = 0;     // weights streamed to the device (the three below, and the host's conversions)
  double weightsSetupMs = 0; //   checkpoint opened, device memory and the page-locked staging buffers
  double weightsReadMs = 0;  //   checkpoint bytes read (or copied) into the staging buffers, f16 converted there
  double weightsWaitMs = 0;  //   waiting for the copy engine to free a staging buffer, and for the last copy
  bool weightsShared = false; // the weights are EngineOptions::weightsFrom's: nothing was read or uploaded
  size_t weightBytes = 0;   // device bytes of weights and constants but the rotation tables (a step reads a
                            // few rows of those: what the benchmarks' bandwidth figures count is the rest)
  int tunedKernels = 0;     // tunable kernels with a tuned tile
  int defaultTileKernels = 0; // tunable kernels on the heuristic default
  std::string tuningDb;     // the database consulted ("" when none), or "bundle"
  std::string warning;      // e.g. a tuning database ignored, and why
};

struct LoadedFunction {
  cuda::Module module;
  cuda::Function fn;
};

class Engine {
public:
  // `model`: an .ir file, a .mfb bundle or an HF checkpoint directory.
  static llvm::Expected<std::unique_ptr<Engine>> load(llvm::StringRef model, const EngineOptions &options = {});

  const ir::Module &module() const { return *mod; }
  const Plan &plan() const { return pl; }
  const LoadStats &stats() const { return st; }
  const cuda::DeviceInfo &device() const { return info; }
  int64_t vocab() const;
  // The loaded kernel of plan kernel `index`.
  const cuda::Function &function(int index) const { return functions[index].fn; }
  // The device address of a Weight or Constant plan buffer (0 for other kinds: sessions own those).
  cuda::DevicePtr weightPointer(int buffer) const { return pointers[buffer]; }

  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;
  ~Engine();

private:
  Engine() = default;
  // The weights from the checkpoint at `weightsPath`, or filled on the device (EngineOptions::syntheticWeights).
  llvm::Error uploadWeights(const std::string &weightsPath, size_t chunkBytes, bool synthetic);
  // `from`'s weights, when they came from the same checkpoint (or both are synthetic) and its plan lays out
  // every weight and constant as this one's (false: load them).
  bool shareWeights(const Engine &from, const std::string &weightsPath, bool synthetic);
  void setPointers(const std::vector<size_t> &offsets); // each weight and constant's address in weightMemory
  llvm::Error uploadConstant(const PlanBuffer &b, size_t offset); // a rotation table, a fill or the plan's values
  llvm::Error fillSyntheticWeights(const std::vector<size_t> &offsets); // every Weight buffer, at its offset

  std::unique_ptr<ir::Module> mod;
  Plan pl;
  LoadStats st;
  cuda::DeviceInfo info;
  std::vector<LoadedFunction> functions; // by plan kernel index
  // Every weight and constant, each 256-byte aligned; shared with engines loaded from this one
  // (EngineOptions::weightsFrom), which only read it.
  std::shared_ptr<cuda::DeviceBuffer> weightMemory;
  std::string weightsSource; // where they came from: the checkpoint, or "" when synthetic (shared: the donor's)
  bool syntheticWeights = false;
  std::vector<cuda::DevicePtr> pointers; // by plan buffer index
  friend struct EngineLoader;
};

} // namespace minfer::rt
