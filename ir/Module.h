// ir/Module.h — the in-memory form of a minfer IR module.
//
// A module names its dims once, its weights once (each bound to a safetensors tensor name; a name holding
// `{l}` is a per-layer weight, one tensor per layer), and one graph: inputs `%tokens` (and optionally
// `%positions`), a list of items (ops, and `repeat` blocks that stamp out the decoder layers), and the
// returned logits. Values are in SSA form and referred to by ValueId, an index into `values`.
#pragma once

#include "ir/OpInfo.h"
#include "ir/Types.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace minfer::ir {

using ValueId = int32_t;

struct Value {
  std::string name; // without the leading '%'
  Type type;
  llvm::SMLoc loc;
};

// An integer written either as a literal or as a model dim (`heads`); `dim` keeps the name for printing.
struct IntRef {
  int64_t value = 0;
  std::string dim;
  std::string str() const { return dim.empty() ? std::to_string(value) : dim; }
};

struct AttrValue {
  AttrKind kind = AttrKind::Int;
  IntRef i;                 // Int
  double f = 0;             // Float
  int choice = 0;           // Enum: the value (an index into AttrSpec::texts)
  std::vector<IntRef> ints; // Ints

  static AttrValue ofFloat(double f);
  template <typename E> static AttrValue ofEnum(E e) {
    AttrValue v;
    v.kind = AttrKind::Enum;
    v.choice = static_cast<int>(e);
    return v;
  }
};

struct Operand {
  bool isWeight = false;
  int32_t id = 0; // a ValueId, or an index into Module::weights
};

struct Op {
  OpKind kind;
  std::vector<ValueId> results;
  std::vector<Operand> operands;
  std::vector<std::optional<AttrValue>> attrs; // indexed like OpInfo::attrs
  llvm::SMLoc loc;

  const OpInfo &info() const { return opInfo(kind); }
  // Attributes by name: absent ones read as null (or `fallback`). Asking for an attribute the op's row of
  // Ops.def does not declare, or for an enum as another type, is a bug: it stops the program with both named.
  const AttrValue *attr(Attr) const;
  bool has(Attr a) const { return attr(a) != nullptr; }
  // For code that walks ops of every kind: whether this op's row declares `a` and the op sets it (never a
  // bug to ask, unlike has() on an undeclared attribute).
  bool hasIfDeclared(Attr a) const { return info().declares(a) && has(a); }
  int64_t intAttr(Attr, int64_t fallback = 0) const;
  double floatAttr(Attr, double fallback = 0) const;
  std::vector<int64_t> intsAttr(Attr) const;
  // An enum attribute; when absent, the enum's value with an empty text (`act`: Activation::None), or
  // `fallback`; an absent attribute with neither is a bug.
  template <typename E> E enumAttr(Attr a, std::optional<E> fallback = std::nullopt) const {
    checkEnum(a, EnumInfo<E>::name);
    if (const AttrValue *v = attr(a)) return static_cast<E>(v->choice);
    if (fallback) return *fallback;
    return static_cast<E>(absentChoice(a));
  }
  // Sets attribute `a` (declared by the op's row) to `v`.
  void setAttr(Attr a, AttrValue v);

private:
  size_t slot(Attr) const;
  void checkEnum(Attr, llvm::StringRef type) const;
  int absentChoice(Attr) const;
};

// `%out = repeat layers (%x = %init) { ...body... yield %next }`: the body runs `count` times, layer l
// reading per-layer weights of layer l; carried values start at `inits` and take the yielded values.
struct Repeat {
  IntRef count;
  std::vector<ValueId> carried, inits, yields, results;
  std::vector<Op> body;
  llvm::SMLoc loc;
};

using Item = std::variant<Op, Repeat>;

struct DimDecl {
  std::string name;
  int64_t value = 0;
  llvm::SMLoc loc;
};

// A weight is either bound to a checkpoint tensor, or packed: the rows of other weights stacked
// (`= concat(@wq, @wk, @wv)`), which the fusion pass writes so that sibling matmuls become one; it is
// assembled at load and has no tensor of its own.
struct WeightDecl {
  std::string name;   // without the leading '@'
  Type type;          // the logical type as ops see it: matmul weights are [out, in]
  std::string tensor; // safetensors tensor name; `{l}` stands for the layer index; empty when packed
  bool transposed = false; // stored [in, out] in the file (GPT-2 Conv1D), transposed at load
  llvm::SMLoc loc;
  std::vector<int> parts; // packed: the weights (indices into Module::weights) whose rows it stacks
  bool packedPerLayer = false; // packed: its parts are per-layer weights

  bool packed() const { return !parts.empty(); }
  bool perLayer() const { return packed() ? packedPerLayer : llvm::StringRef(tensor).contains("{l}"); }
  std::string tensorName(int64_t layer) const; // `{l}` replaced by the layer index
};

class Module {
public:
  std::string name;
  std::vector<DimDecl> dims;
  std::vector<WeightDecl> weights;
  std::vector<Value> values;
  std::vector<ValueId> inputs;
  std::vector<Item> items;
  std::vector<ValueId> outputs;
  llvm::SMLoc loc, returnLoc;
  // The text this module was parsed from, for diagnostics; null for a module built in code.
  std::shared_ptr<llvm::SourceMgr> source;

  const DimDecl *findDim(llvm::StringRef name) const;
  int findWeight(llvm::StringRef name) const; // -1 when absent
  // Declares a packed weight stacking the rows of `parts` (same dtype, same columns, all per-layer or
  // none), named after them; returns its index.
  int addPackedWeight(llvm::ArrayRef<int> parts);
  ValueId findInput(llvm::StringRef name) const; // -1 when absent
  const Value &value(ValueId id) const { return values[static_cast<size_t>(id)]; }
  ValueId addValue(std::string name, Type type, llvm::SMLoc loc);

  // For each weight: how many tensors it binds, the count of the repeat that reads it for a per-layer
  // weight, else 1 (a part of a packed weight: as many as the packed one).
  std::vector<int64_t> weightLayerCounts() const;
  // KV-cache slots a sequence needs: attention ops, each counted once per layer of its repeat.
  int64_t numKvSlots() const;

  // An error at `loc`, formatted `file:line:col: error: msg` with the source line and a caret when the
  // module has source text, else `error: in module 'name': msg`.
  llvm::Error error(llvm::SMLoc loc, const llvm::Twine &msg) const;
};

// matmul, matmul_residual, gated_matmul and qkv: the ops that are one matrix product of their input (operand 0).
bool isMatmulFamily(OpKind);
// `op` is of the matmul family and reads `v` as its input x only (not also as, say, its residual).
bool readsAsMatmulInput(const Op &op, ValueId v);

// Calls `fn(op, layerCount)` for every op, including those inside repeat bodies (layerCount = the repeat's
// count, 0 outside repeats).
template <typename Fn> void forEachOp(const Module &m, Fn &&fn) {
  for (const Item &item : m.items) {
    if (const Op *op = std::get_if<Op>(&item)) {
      fn(*op, int64_t{0});
    } else {
      const Repeat &r = std::get<Repeat>(item);
      for (const Op &bodyOp : r.body) fn(bodyOp, r.count.value);
    }
  }
}

} // namespace minfer::ir
