// runtime/KernelLoader.cpp — spec → cubin (cached) → module → function.
#include "runtime/KernelLoader.h"

#include "ir/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"

#include <cstring>
#include <vector>

namespace minfer {

llvm::Expected<Target> deviceTarget() {
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  return parseTarget(deviceTargetName(info->major, info->minor));
}

llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec, const Target &target, KernelCache *cache) {
  KernelSource src = kernelSource(spec);
  auto compiled = cache ? cache->getOrCompile(src, target, {}) : compileKernel(src, target);
  if (!compiled) return compiled.takeError();
  auto module = cuda::Module::load(compiled->cubin, spec.name());
  if (!module) return module.takeError();
  auto fn = module->function(compiled->loweredName);
  if (!fn) return fn.takeError();
  return LoadedKernel{std::move(*module), *fn};
}

llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec) {
  auto target = deviceTarget();
  if (!target) return target.takeError();
  KernelCache cache = KernelCache::openDefault();
  return loadKernel(spec, *target, &cache);
}

llvm::Error launchSpec(const cuda::Function &fn, const KernelSpec &spec, int64_t rows, const void *params,
                       cuda::StreamHandle stream, bool dependent) {
  const ParamsLayout &layout = spec.params();
  std::vector<TensorMapArg> wanted = spec.tensorMaps(rows); // empty but for the wgmma kernels
  // The maps and the argument list on the stack (the driver copies the arguments at the launch). A
  // TensorMap must be 64-byte aligned, which a heap-grown SmallVector would not guarantee: at most three (attention: q, k and v).
  constexpr size_t kMaxMaps = 3;
  if (wanted.size() > kMaxMaps)
    return ir::makeError("launch of " + spec.name() + ": " + std::to_string(wanted.size()) + " tensor maps, at most " +
                         std::to_string(kMaxMaps));
  cuda::TensorMap maps[kMaxMaps];
  llvm::SmallVector<void *, 1 + kMaxMaps> args = {const_cast<void *>(params)};
  for (size_t i = 0; i < wanted.size(); ++i) {
    const TensorMapArg &m = wanted[i];
    int field = layout.find(m.pointer);
    if (field < 0 || layout.fields[field].type != ParamType::Ptr)
      return ir::makeError("launch of " + spec.name() + ": its tensor map reads field '" + m.pointer +
                           "', which is not a pointer field of " + layout.name);
    uint64_t base;
    std::memcpy(&base, static_cast<const uint8_t *>(params) + layout.fields[field].offset, sizeof base);
    int64_t outer = m.outer;
    if (m.outerPlus) {
      int plus = layout.find(m.outerPlus);
      if (plus < 0 || layout.fields[plus].type != ParamType::I32)
        return ir::makeError("launch of " + spec.name() + ": its tensor map adds field '" + m.outerPlus +
                             "', which is not an int field of " + layout.name);
      int32_t v;
      std::memcpy(&v, static_cast<const uint8_t *>(params) + layout.fields[plus].offset, sizeof v);
      outer += v;
    }
    auto map = cuda::encodeTensorMap2D(base, m.inner, outer, m.boxInner, m.boxOuter);
    if (!map) return map.takeError();
    maps[i] = *map;
    args.push_back(&maps[i]);
  }
  return cuda::launch(fn, spec.launch(rows), args.data(), stream, dependent);
}

} // namespace minfer
