// ir/Parser.h — reads minfer IR text into a Module.
//
//   model "tinyllama"
//   dim hidden = 2048                         // every dim named once
//   weight @wq : bf16[q_dim, hidden] = "model.layers.{l}.self_attn.q_proj.weight"
//   weight @c_attn : f32[qkv, hidden] = transpose "h.{l}.attn.c_attn.weight"
//   graph(%tokens: i32[T], %positions: i32[T]) {
//     %x = embedding %tokens, @embed : bf16[T, hidden]
//     %h = repeat layers (%r = %x) { ... yield %r2 }
//     return %logits
//   }
//
// Errors are DiagnosticErrors at `file:line:col`. The parser checks syntax, names and the op table's
// signatures; shapes and op rules are the verifier's job (parseModule does not verify).
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <memory>

namespace minfer::ir {

llvm::Expected<std::unique_ptr<Module>> parseModule(std::unique_ptr<llvm::MemoryBuffer> buffer);
llvm::Expected<std::unique_ptr<Module>> parseModuleString(llvm::StringRef text,
                                                          llvm::StringRef bufferName = "<string>");
// Reads `path` (or stdin for "-") and parses it; a missing file is an error naming it.
llvm::Expected<std::unique_ptr<Module>> parseModuleFile(llvm::StringRef path);

} // namespace minfer::ir
