// io/HFImport.h — builds a minfer IR module from a Hugging Face checkpoint directory.
//
// Reads DIR/config.json for LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM and GPT2LMHeadModel,
// with each family's quirks (GPT-2's Conv1D weights stored [in, out] and transposed at load, its optional
// `transformer.` prefix, tied lm_heads, an explicit head_dim, rope settings in transformers v4
// `rope_theta` / `rope_scaling` or v5 `rope_parameters`). A setting minfer cannot honour (an unsupported
// rope type, an active sliding window, ...) is an error naming the field; nothing is silently ignored.
// When the directory holds weights, their dtypes and tensor names are read from the safetensors headers.
#pragma once

#include "io/Safetensors.h"
#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <memory>
#include <string>

namespace minfer {

// DIR/config.json, plus the checkpoint in DIR when there is one.
llvm::Expected<std::unique_ptr<ir::Module>> importHF(llvm::StringRef dir);

// The IR text for a parsed config; `configPath` names it in errors; `ckpt` (may be null) supplies tensor
// dtypes and name prefixes. The text is canonical (it went through parse, verify and print).
llvm::Expected<std::string> importHFConfig(const llvm::json::Object &config, llvm::StringRef configPath,
                                           const Checkpoint *ckpt);

} // namespace minfer
