// compiler/WeightLoader.cpp — checks and reads the tensors behind a module's weights.
#include "compiler/WeightLoader.h"

#include "llvm/Support/FormatVariadic.h"

namespace minfer {
namespace {

StDType storedDType(ir::DType t) {
  switch (t) {
  case ir::DType::BF16: return StDType::BF16;
  case ir::DType::F16: return StDType::F16;
  case ir::DType::F32: return StDType::F32;
  case ir::DType::I32: return StDType::I32;
  }
  return StDType::F32;
}

std::string shapeList(llvm::ArrayRef<int64_t> s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The tensor behind layer `layer` of weight `w`, checked.
llvm::Expected<Checkpoint::Ref> lookup(const ir::WeightDecl &w, int64_t layer, const Checkpoint &ckpt) {
  std::string name = w.tensorName(layer);
  std::string what = "tensor '" + name + "' (weight @" + w.name + (w.perLayer() ? ", layer " + std::to_string(layer) : "") + ")";
  auto fail = [&](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), ckpt.path() + ": " + what + " " + msg);
  };
  auto ref = ckpt.find(name);
  if (!ref) return fail("is missing");
  StDType want = storedDType(w.type.dtype);
  if (ref->info->dtype != want)
    return fail("has dtype " + stDTypeName(ref->info->dtype) + ", expected " + stDTypeName(want));
  std::vector<int64_t> expect;
  for (const ir::Dim &d : w.type.shape) expect.push_back(d.value);
  if (w.transposed) std::reverse(expect.begin(), expect.end());
  if (ref->info->shape != expect)
    return fail("has shape " + shapeList(ref->info->shape) + ", expected " + shapeList(expect) +
                (w.transposed ? " (stored [in, out], transposed at load)" : ""));
  return *ref;
}

} // namespace

llvm::Error checkWeights(const ir::Module &m, const Checkpoint &ckpt) {
  std::vector<int64_t> counts = m.weightLayerCounts();
  for (size_t i = 0; i < m.weights.size(); ++i)
    for (int64_t l = 0; l < counts[i]; ++l)
      if (auto ref = lookup(m.weights[i], l, ckpt); !ref) return ref.takeError();
  return llvm::Error::success();
}

llvm::Expected<ir::WeightSet> loadWeightsF32(const ir::Module &m, const Checkpoint &ckpt) {
  if (auto e = checkWeights(m, ckpt)) return e;
  std::vector<int64_t> counts = m.weightLayerCounts();
  ir::WeightSet set;
  set.byDecl.resize(m.weights.size());
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const ir::WeightDecl &w = m.weights[i];
    for (int64_t l = 0; l < counts[i]; ++l) {
      auto ref = lookup(w, l, ckpt);
      if (!ref) return ref.takeError();
      auto data = readAsFloat32(*ref->file, *ref->info);
      if (!data) return data.takeError();
      ir::Tensor t;
      for (const ir::Dim &d : w.type.shape) t.shape.push_back(d.value);
      if (!w.transposed) {
        t.data = std::move(*data);
      } else { // stored [in, out]; the IR wants [out, in]
        int64_t rows = t.shape[0], cols = t.shape[1];
        t.data.resize(data->size());
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t c = 0; c < cols; ++c) t.data[r * cols + c] = (*data)[c * rows + r];
      }
      set.byDecl[i].push_back(std::move(t));
    }
  }
  return set;
}

} // namespace minfer
