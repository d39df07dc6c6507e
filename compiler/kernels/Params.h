// compiler/kernels/Params.h — the one argument of every kernel: its family's typed Params struct.
//
// Each kernel template takes a single struct by value (templates/<family>.cuh, e.g. `struct NormParams`),
// and the family's spec header declares its host mirror with the same field names, device pointers held
// as uint64_t. A ParamsLayout (name, type, offset of every field) describes the host struct once, and all
// uses go through it:
//   - the plan binds fields by name (compiler/Plan.cpp): a name the layout lacks is an error there;
//   - the runtime writes each bound value at its field's offset, converted to the field's type;
//   - every generated source static_asserts that the template's struct has the host's size and offsets
//     (KernelSpec::source), so the two sides cannot drift apart without a compile error naming the field;
//   - tests, benchmarks and the autotuner fill the host struct itself and launch it whole.
// The field names follow the template's (snake_case, as a device ABI), not the host's naming style.
#pragma once

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace minfer {

enum class ParamType {
  Ptr,    // a device pointer (uint64_t here, a typed pointer in the template)
  I32,    // int
  F32,    // float
  U64,    // unsigned long long
  Struct, // a nested struct with its own layout (a matmul's EpiParams)
};

struct ParamsLayout;

struct ParamField {
  const char *name;
  ParamType type;
  uint32_t offset;
  const ParamsLayout *nested = nullptr; // Struct
};

struct ParamsLayout {
  const char *name; // the template's type, e.g. "minfer::NormParams"
  uint32_t bytes;   // sizeof on both sides
  llvm::ArrayRef<ParamField> fields;

  // The index of the field called `name`, or -1.
  int find(llvm::StringRef name) const;
  // static_asserts for a generated source: the template's struct has this size and these offsets.
  std::string layoutChecks() const;
};

// Defines S::layout() from S's fields, each MINFER_FIELD(name, type) (or MINFER_FIELD_STRUCT(name, layout)
// for a nested struct), e.g. MINFER_PARAMS_LAYOUT(RopeParams, MINFER_FIELD(x, Ptr), ..., MINFER_FIELD(rows, I32)).
#define MINFER_PARAMS_LAYOUT(S, ...)                                                                         \
  const ::minfer::ParamsLayout &S::layout() {                                                                \
    using Self = S;                                                                                          \
    static const ::minfer::ParamField fields[] = {__VA_ARGS__};                                              \
    static const ::minfer::ParamsLayout layout{"minfer::" #S, sizeof(S), fields};                            \
    return layout;                                                                                           \
  }
#define MINFER_FIELD(field, type)                                                                            \
  ::minfer::ParamField { #field, ::minfer::ParamType::type, static_cast<uint32_t>(offsetof(Self, field)) }
#define MINFER_FIELD_STRUCT(field, nestedLayout)                                                             \
  ::minfer::ParamField {                                                                                     \
    #field, ::minfer::ParamType::Struct, static_cast<uint32_t>(offsetof(Self, field)), &(nestedLayout)       \
  }

// The largest Params struct of any family: what a launch's argument buffer holds.
constexpr size_t kMaxParamsBytes = 256;

// Writes `v` into `blob` at `f`, converted to the field's type (Ptr and U64: 64 bits; I32: int; F32: float).
void writeParam(uint8_t *blob, const ParamField &f, uint64_t v);
void writeParam(uint8_t *blob, const ParamField &f, int64_t v);
void writeParam(uint8_t *blob, const ParamField &f, double v);

} // namespace minfer
