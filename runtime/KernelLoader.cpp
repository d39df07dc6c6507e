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

llvm::Expected<LoadedKernel> loadKernel(const KernelSource &src, const Target &target, KernelCache *cache) {
  auto compiled = cache ? cache->getOrCompile(src, target, {}) : compileKernel(src, target);
  if (!compiled) return compiled.takeError();
  auto module = cuda::Module::load(compiled->cubin, src.name);
  if (!module) return module.takeError();
  auto fn = module->function(compiled->loweredName);
  if (!fn) return fn.takeError();
  return LoadedKernel{std::move(*module), *fn};
}

llvm::Expected<LoadedKernel> loadKernel(const KernelSpec &spec, const Target &target, KernelCache *cache) {
  return loadKernel(kernelSource(spec), target, cache);
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
  // TensorMap must be 64-byte aligned, which a heap-grown SmallVector would not guarantee: at most three
  // (attention: q, k and v).
  constexpr size_t kMaxMaps = 3;
  if (wanted.size() > kMaxMaps)
    return ir::makeError("launch of " + spec.name() + ": " + std::to_string(wanted.size()) + " tensor maps, at most " +
                         std::to_string(kMaxMaps));
  // The value of the Params field `name`, which must be of `type` (`verb` and `kind` word the error).
  auto read = [&](const char *name, ParamType type, const char *verb, const char *kind, auto &value) -> llvm::Error {
    int field = layout.find(name);
    if (field < 0 || layout.fields[field].type != type)
      return ir::makeError("launch of " + spec.name() + ": its tensor map " + verb + " field '" + name +
                           "', which is not " + kind + " field of " + layout.name);
    std::memcpy(&value, static_cast<const uint8_t *>(params) + layout.fields[field].offset, sizeof value);
    return llvm::Error::success();
  };
  cuda::TensorMap maps[kMaxMaps];
  llvm::SmallVector<void *, 1 + kMaxMaps> args = {const_cast<void *>(params)};
  for (size_t i = 0; i < wanted.size(); ++i) {
    const TensorMapArg &m = wanted[i];
    uint64_t base;
    if (auto e = read(m.pointer, ParamType::Ptr, "reads", "a pointer", base)) return e;
    int32_t plus = 0;
    if (m.outerPlus)
      if (auto e = read(m.outerPlus, ParamType::I32, "adds", "an int", plus)) return e;
    auto map = cuda::encodeTensorMap2D(base, m.inner, m.outer + plus, m.boxInner, m.boxOuter);
    if (!map) return map.takeError();
    maps[i] = *map;
    args.push_back(&maps[i]);
  }
  return cuda::launch(fn, spec.launch(rows), args.data(), stream, dependent);
}

} // namespace minfer
