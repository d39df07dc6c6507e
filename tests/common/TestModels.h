// tests/common/TestModels.h — small helpers shared by the unit tests: parse-and-verify IR text, seeded
// random weights for any module, and a relative-error measure.
#pragma once

#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"

#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>

namespace minfer::test {

// Parses and verifies `text`; a failure fails the calling test with the diagnostic.
inline std::unique_ptr<ir::Module> parseVerified(const std::string &text) {
  auto m = ir::parseModuleString(text, "test.ir");
  if (!m) {
    ADD_FAILURE() << llvm::toString(m.takeError());
    return nullptr;
  }
  if (auto e = ir::verifyModule(**m)) {
    ADD_FAILURE() << llvm::toString(std::move(e));
    return nullptr;
  }
  return std::move(*m);
}

// Weights drawn from N(mean, stddev) with a fixed seed: vectors (norm gains, biases) around 1 and 0.1,
// matrices around 0 — never zeros.
inline ir::WeightSet randomWeights(const ir::Module &m, unsigned seed) {
  std::mt19937 rng(seed);
  ir::WeightSet set;
  std::vector<int64_t> counts = m.weightLayerCounts();
  for (size_t i = 0; i < m.weights.size(); ++i) {
    const ir::WeightDecl &w = m.weights[i];
    std::vector<int64_t> shape;
    for (const ir::Dim &d : w.type.shape) shape.push_back(d.value);
    bool vec = shape.size() == 1;
    std::normal_distribution<float> dist(vec ? 1.0f : 0.0f, vec ? 0.1f : 0.5f);
    std::vector<ir::Tensor> layers;
    for (int64_t l = 0; l < counts[i]; ++l) {
      ir::Tensor t(shape);
      for (float &x : t.data) x = dist(rng);
      layers.push_back(std::move(t));
    }
    set.byDecl.push_back(std::move(layers));
  }
  return set;
}

// ‖a − b‖ / ‖b‖ over all elements.
inline double relError(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return std::sqrt(num / (den > 0 ? den : 1));
}

// A 2-layer Llama-style model (GQA 4:2, SwiGLU, rope) small enough for exhaustive tests; head_dim 4 by
// default (hidden 4x, kv_dim 2x and ffn 6x head_dim). The GPU kernels need head_dim >= 8.
inline std::string tinyLlamaText(const std::string &schedule = "schedule = default", int headDim = 4) {
  return R"(model "tiny"
dim vocab = 32
dim hidden = )" + std::to_string(4 * headDim) + R"(
dim heads = 4
dim kv_heads = 2
dim head_dim = )" + std::to_string(headDim) + R"(
dim kv_dim = )" + std::to_string(2 * headDim) + R"(
dim ffn = )" + std::to_string(6 * headDim) + R"(
weight @embed : bf16[vocab, hidden] = "embed"
weight @n1 : bf16[hidden] = "l{l}.n1"
weight @wq : bf16[hidden, hidden] = "l{l}.wq"
weight @wk : bf16[kv_dim, hidden] = "l{l}.wk"
weight @wv : bf16[kv_dim, hidden] = "l{l}.wv"
weight @wo : bf16[hidden, hidden] = "l{l}.wo"
weight @n2 : bf16[hidden] = "l{l}.n2"
weight @wg : bf16[ffn, hidden] = "l{l}.wg"
weight @wu : bf16[ffn, hidden] = "l{l}.wu"
weight @wd : bf16[hidden, ffn] = "l{l}.wd"
weight @nf : bf16[hidden] = "nf"
graph(%tokens: i32[T], %positions: i32[T]) {
  %x0 = embedding %tokens, @embed : bf16[T, hidden]
  %h = repeat 2 (%x = %x0) {
    %a = rms_norm %x, @n1 {eps = 1e-5} : bf16[T, hidden]
    %q0 = matmul %a, @wq : bf16[T, hidden]
    %k0 = matmul %a, @wk : bf16[T, kv_dim]
    %v = matmul %a, @wv : bf16[T, kv_dim]
    %q = rope %q0, %positions {heads = heads, head_dim = head_dim, theta = 10000.0, style = half, )" +
         schedule + R"(} : bf16[T, hidden]
    %k = rope %k0, %positions {heads = kv_heads, head_dim = head_dim, theta = 10000.0, style = half, )" +
         schedule + R"(} : bf16[T, kv_dim]
    %att = attention %q, %k, %v {heads = heads, kv_heads = kv_heads, head_dim = head_dim} : bf16[T, hidden]
    %o = matmul %att, @wo : bf16[T, hidden]
    %x1 = add %x, %o : bf16[T, hidden]
    %m = rms_norm %x1, @n2 {eps = 1e-5} : bf16[T, hidden]
    %g = matmul %m, @wg : bf16[T, ffn]
    %u = matmul %m, @wu : bf16[T, ffn]
    %s = silu %g : bf16[T, ffn]
    %gu = mul %s, %u : bf16[T, ffn]
    %d = matmul %gu, @wd : bf16[T, hidden]
    %x2 = add %x1, %d : bf16[T, hidden]
    yield %x2
  }
  %f = rms_norm %h, @nf {eps = 1e-5} : bf16[T, hidden]
  %logits = matmul %f, @embed : bf16[T, vocab]
  return %logits
}
)";
}

} // namespace minfer::test
