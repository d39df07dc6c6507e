// tests/common/GoldenReference.h — the golden fixtures (tests/golden/fixtures/*, written by
// make_fixtures.py) and their Hugging Face reference, computed in float64: the prompt, the logits for it
// and for 57 teacher-forced steps (64 positions in all), and HF's greedy continuation with the logits each
// token was chosen from.
#pragma once

#include "io/Safetensors.h"
#include "ir/Interpreter.h"

#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace minfer::test {

inline const char *const kFixtures[] = {"gpt2",       "llama_gqa",    "qwen2_tied", "mistral_mqa",
                                        "llama_linear", "gpt2_odd",   "llama_odd",  "qwen2_odd",
                                        "mistral_odd",  "llama_hd64", "mistral_hd128"};

inline std::string fixtureDir(const std::string &name) {
  return std::string(MINFER_SOURCE_DIR) + "/tests/golden/fixtures/" + name;
}

struct Reference {
  std::vector<int32_t> promptIds, forcedIds, greedyIds;
  ir::Tensor promptLogits, forcedLogits;
  ir::Tensor greedyLogits; // row k: the logits greedy_ids[k] was chosen from
};

inline llvm::Expected<Reference> readReference(const std::string &dir) {
  auto file = SafetensorsFile::open(dir + "/reference.safetensors");
  if (!file) return file.takeError();
  Reference ref;
  auto ids = [&](const char *name, std::vector<int32_t> &out) -> llvm::Error {
    const TensorInfo *t = (*file)->find(name);
    if (!t) return llvm::createStringError(llvm::inconvertibleErrorCode(), std::string("missing ") + name);
    auto v = readAsInt64(**file, *t);
    if (!v) return v.takeError();
    out.assign(v->begin(), v->end());
    return llvm::Error::success();
  };
  auto floats = [&](const char *name, ir::Tensor &out) -> llvm::Error {
    const TensorInfo *t = (*file)->find(name);
    if (!t) return llvm::createStringError(llvm::inconvertibleErrorCode(), std::string("missing ") + name);
    auto v = readAsFloat32(**file, *t);
    if (!v) return v.takeError();
    out.shape = t->shape;
    out.data = std::move(*v);
    return llvm::Error::success();
  };
  if (auto e = ids("prompt_ids", ref.promptIds)) return e;
  if (auto e = ids("forced_ids", ref.forcedIds)) return e;
  if (auto e = ids("greedy_ids", ref.greedyIds)) return e;
  if (auto e = floats("prompt_logits", ref.promptLogits)) return e;
  if (auto e = floats("forced_logits", ref.forcedLogits)) return e;
  if (auto e = floats("greedy_logits", ref.greedyLogits)) return e;
  return ref;
}

} // namespace minfer::test
