// compiler/kernels/Persistent.cpp — the persistent decode kernel's spec: its name, entry and Params.
#include "compiler/kernels/Persistent.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/xxhash.h"

namespace minfer {

MINFER_PARAMS_LAYOUT(PersistentParams, MINFER_FIELD(tasks, Ptr), MINFER_FIELD(counters, Ptr), MINFER_FIELD(trace, Ptr),
                     MINFER_FIELD(num_tasks, I32))

std::string PersistentDecodeSpec::name() const {
  std::string all;
  for (const std::string &t : taskTypes) all += t + ";";
  if (ringBytes) all += "ring@" + std::to_string(ringOffset());
  return "persistent_decode_t" + std::to_string(threads) + (ringBytes ? "_ring" + std::to_string(ringBytes) : "") + "_k" +
         std::to_string(taskTypes.size()) + "_" +
         llvm::utohexstr(llvm::xxHash64(all) & 0xffffffffu, /*LowerCase=*/true);
}

std::string PersistentDecodeSpec::entry() const {
  std::string e = "minfer::persistent_decode<" + std::to_string(threads) + ", " + std::to_string(ringOffset()) + ", " +
                  std::to_string(ringBytes);
  for (const std::string &t : taskTypes) e += ", " + t;
  return e + ">";
}

LaunchDims PersistentDecodeSpec::launch(int64_t /*rows*/) const {
  LaunchDims d;
  d.block = {static_cast<unsigned>(blockThreads()), 1, 1};
  d.sharedBytes = ringBytes ? ringOffset() + ringBytes : sharedBytes;
  return d;
}

llvm::json::Object PersistentDecodeSpec::toJSON() const {
  llvm::json::Array tasks;
  for (const std::string &t : taskTypes) tasks.push_back(t);
  return llvm::json::Object{{"family", "persistent_decode"},
                            {"threads", threads},
                            {"shared_bytes", sharedBytes},
                            {"ring_offset", ringOffset()},
                            {"ring_bytes", ringBytes},
                            {"bodies", std::move(tasks)}};
}

llvm::Error PersistentDecodeSpec::validate(const Target &) const {
  if (taskTypes.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), name() + ": a persistent kernel needs at least one task");
  if (threads < 32 || threads > 1024 || threads % 32)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), name() + ": threads must be 1..32 whole warps");
  if (ringBytes % 128)
    return llvm::createStringError(llvm::inconvertibleErrorCode(), name() + ": the weight ring must be a multiple of 128 bytes");
  return llvm::Error::success();
}

} // namespace minfer
