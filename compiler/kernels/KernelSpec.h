// compiler/kernels/KernelSpec.h — one specialised kernel: what template it instantiates with which
// constants, its readable name, and how it is launched.
//
// Each kernel family (gemm, gemv, norm, attention, ...) has a typed spec struct in its own file under
// compiler/kernels/ that derives from KernelSpec: enums and ints, no positional flags. Its name() reads
// like a URI (`gemm_bf16_n5632_k2048_m128n128k32_s3_w2x4_epi_bias`) and is used in logs, dumps, cache
// listings and bundle manifests. The template itself lives in templates/<family>.cuh.
#pragma once

#include "compiler/kernels/Params.h"
#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace minfer {

// Grid and block of one launch, and its dynamic shared memory.
struct LaunchDims {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned sharedBytes = 0;
};

// A TMA tensor map a kernel takes after its Params struct (sm_90a kernels, templates/hopper.cuh): the 2-D
// bf16 matrix whose base address is the Params field `pointer`, `outer` rows of `inner` contiguous elements,
// read in boxInner x boxOuter boxes with 128-byte swizzle. The launcher (runtime/KernelLoader.h) encodes one
// per entry, from the Params it launches with, and passes them in order as further kernel arguments.
struct TensorMapArg {
  const char *pointer; // a Ptr field of the spec's params()
  int64_t inner = 0, outer = 0;
  int boxInner = 0, boxOuter = 0;
  // An I32 field of the params whose value the launcher adds to `outer` (attention's start_pos: the cache
  // rows before this launch's), or null.
  const char *outerPlus = nullptr;
};

// A flat grid-stride launch over `work` items, one per thread of `threads`-wide blocks: at least one block,
// at most `maxBlocks` (the kernel's grid-stride loop covers the rest).
LaunchDims gridStride(int64_t work, unsigned threads, int64_t maxBlocks);

class KernelSpec {
public:
  virtual ~KernelSpec() = default;

  // Readable and unique per instantiation: two specs with equal names generate identical source.
  virtual std::string name() const = 0;
  // The template header that defines the kernel, e.g. "gemm.cuh".
  virtual std::string header() const = 0;
  // The C++ name expression of the __global__ instantiation, e.g. "minfer::gemm<2048, 5632, ...>"; NVRTC
  // instantiates it (nvrtcAddNameExpression) and gives back its lowered name.
  virtual std::string entry() const = 0;
  // Grid, block and shared memory for `rows` rows (tokens, or sequences for decode attention).
  virtual LaunchDims launch(int64_t rows) const = 0;
  // The kernel's one argument: its family's Params struct (compiler/kernels/Params.h).
  virtual const ParamsLayout &params() const = 0;
  // The tensor maps the kernel takes after its Params for a launch over `rows` (none for most families).
  virtual std::vector<TensorMapArg> tensorMaps(int64_t /*rows*/) const { return {}; }
  // The spec's fields, for --emit=plan and bundle manifests.
  virtual llvm::json::Object toJSON() const = 0;
  // The template's shape rules, checked before NVRTC sees them so an impossible spec is a readable error
  // where it was planned (the template's static_asserts say the same at compile time).
  virtual llvm::Error validate(const Target &) const { return llvm::Error::success(); }

  // The generated source: a header comment naming the spec, the template include, the checks that the
  // template's Params struct matches the host's, and the entry NVRTC instantiates. Every constant is baked
  // into the template arguments.
  std::string source() const;

  // ---- autotuning (compiler/Tuning.h): a tunable family exposes its tile parameters ----
  // What the tile does not change (family, shape, epilogue, prologue), e.g. "gemm_bf16_n2048_k2048_epi_none";
  // empty for a spec with nothing to tune.
  virtual std::string tuningKey() const { return ""; }
  // The tile as it appears in the name ("m128n128k64_s3_w2x2"), and the same spec with another tile
  // parsed from that form (nullptr when `tile` does not parse or breaks the family's rules).
  virtual std::string tileName() const { return ""; }
  virtual std::shared_ptr<KernelSpec> withTile(llvm::StringRef tile, const Target &) const { return nullptr; }
  // Every tile the tuner should time for `rows` rows on `target` (the spec itself among them or not).
  virtual std::vector<std::shared_ptr<KernelSpec>> tuningCandidates(const Target &, int64_t rows) const { return {}; }
  // Tiles one step from this one that only a whole step can rank (a gemv's: a ring slot, a split block): the
  // tuner times those of the default and of its own winner with the rest and keeps them as runners-up
  // whatever their own time, for the in-step pass.
  virtual std::vector<std::shared_ptr<KernelSpec>> stepNeighbours(const Target &) const { return {}; }

  // ---- the persistent decode kernel (compiler/kernels/Persistent.h) ----
  // This kernel as a task of a persistent kernel whose blocks have `threads` threads, expected to run on
  // about `grid` blocks (SMs x blocks an SM: a family may shape its tiles so that one round of them covers
  // the work): a spec of the same family and Params whose launch(rows) has that block (its grid is the
  // task's tiles), or nullptr when the family has no task form, or none for that block size.
  virtual std::shared_ptr<KernelSpec> asTask(int /*threads*/, int /*grid*/) const { return nullptr; }
  // The C++ type of the task (templates/persistent.cuh), e.g. "minfer::GemvTask<2048, 2048, 1, 2, 4, ...>";
  // empty for a family without a task form. The persistent kernel instantiates asTask's results' types.
  virtual std::string taskType() const { return ""; }
  // This task (an asTask result) reading its weights from the persistent kernel's weight ring, which streams
  // them ahead of the task (templates/persistent.cuh WeightRing: cp.async.bulk, sm_90 and later), for up to
  // `maxRows` rows of A, its tiles shaped for `grid` blocks; nullptr where the family has no such form.
  virtual std::shared_ptr<KernelSpec> asStreamingTask(int64_t /*maxRows*/, int /*grid*/) const { return nullptr; }
  // The bytes of the largest piece a tile of this task puts in the ring (0: it streams nothing).
  virtual int64_t ringPieceBytes() const { return 0; }
};

// The kernel templates (templates/*.cuh), embedded in the binary at build time (cmake/EmbedTemplates.cmake).
llvm::ArrayRef<EmbeddedHeader> templateHeaders();

// What NVRTC compiles for `spec`: its name, generated source and entry, with the templates it includes.
KernelSource kernelSource(const KernelSpec &spec);

} // namespace minfer
