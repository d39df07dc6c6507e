// runtime/KernelLoader.cpp — spec → cubin (cached) → module → function.
#include "runtime/KernelLoader.h"

namespace minfer {

llvm::Expected<Target> deviceTarget() {
  auto info = cuda::deviceInfo();
  if (!info) return info.takeError();
  return parseTarget("sm_" + std::to_string(info->major * 10 + info->minor));
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

} // namespace minfer
