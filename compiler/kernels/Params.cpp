// compiler/kernels/Params.cpp — field lookup, the generated layout checks, typed writes into a launch's
// argument buffer.
#include "compiler/kernels/Params.h"

#include <cassert>
#include <cstring>

namespace minfer {
namespace {

void checks(const ParamsLayout &l, const std::string &outer, const std::string &prefix, uint32_t base,
            std::string &out) {
  for (const ParamField &f : l.fields) {
    std::string member = prefix + f.name;
    // NVRTC's offsetof is no constant expression; EDG's __INTADDR__ makes the classic form one.
    out += "static_assert(__INTADDR__(&((" + outer + " *)0)->" + member + ") == " + std::to_string(base + f.offset) +
           ", \"" + outer + "::" + member + " is not where the host's mirror (compiler/kernels) puts it\");\n";
    if (f.nested) checks(*f.nested, outer, member + ".", base + f.offset, out);
  }
}

template <typename T> void put(uint8_t *blob, const ParamField &f, T v) { std::memcpy(blob + f.offset, &v, sizeof v); }

} // namespace

int ParamsLayout::find(llvm::StringRef n) const {
  for (size_t i = 0; i < fields.size(); ++i)
    if (n == fields[i].name) return static_cast<int>(i);
  return -1;
}

std::string ParamsLayout::layoutChecks() const {
  std::string out = "static_assert(sizeof(" + std::string(name) + ") == " + std::to_string(bytes) + ", \"" + name +
                    " differs in size from the host's mirror (compiler/kernels)\");\n";
  checks(*this, name, "", 0, out);
  return out;
}

void writeParam(uint8_t *blob, const ParamField &f, uint64_t v) {
  switch (f.type) {
  case ParamType::Ptr:
  case ParamType::U64: put<uint64_t>(blob, f, v); return;
  case ParamType::I32: put<int32_t>(blob, f, static_cast<int32_t>(v)); return;
  case ParamType::F32: put<float>(blob, f, static_cast<float>(v)); return;
  case ParamType::Struct: assert(false && "a nested struct is written whole"); return;
  }
}

void writeParam(uint8_t *blob, const ParamField &f, int64_t v) {
  if (f.type == ParamType::I32) return put<int32_t>(blob, f, static_cast<int32_t>(v));
  if (f.type == ParamType::F32) return put<float>(blob, f, static_cast<float>(v));
  writeParam(blob, f, static_cast<uint64_t>(v));
}

void writeParam(uint8_t *blob, const ParamField &f, double v) {
  if (f.type == ParamType::F32) return put<float>(blob, f, static_cast<float>(v));
  writeParam(blob, f, static_cast<int64_t>(v));
}

} // namespace minfer
