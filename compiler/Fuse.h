// compiler/Fuse.h — the fusion pass: rewrites a verified module so that ops a framework would launch one
// by one become the fused ops of ir/Ops.def, each of which the plan lowers to one kernel.
//
// Rules, applied in this order inside each block (the top level between repeats, and each repeat body):
//   embedding-sum  the add of two embeddings (GPT-2's token and learned position) becomes `embedding_sum`,
//             one gather of both rows.
//   qkv       an attention's q, k, v projections (three matmuls of one input, or one matmul split in
//             three), with the rope of q and k when both have one, become one `qkv` op over a packed
//             weight; its kernel writes k and v straight into the KV cache.
//   gated     mul(act(x . Wg^T), x . Wu^T) becomes `gated_matmul` over the packed [Wg; Wu].
//   epilogue  a matmul's only user, repeatedly: an activation, then a scale, then a residual add, become
//             the matmul's `act` / `scale` attributes and `matmul_residual`.
//   add-norm  `s = add a, b` and a norm of s become `add_rms_norm` / `add_layer_norm` writing s and y.
//   fold      a norm whose every user is a matmul-family op reading it as its input is marked
//             `fold = decode`: decode computes it in those matmuls' prologue instead of its own launch.
// Every rule checks its preconditions and leaves the ops alone otherwise: a value another op still reads
// is never swallowed, weights must stack (same dtype, columns, per-layer binding), attributes must agree.
// The fused module computes what the input computed (the interpreter runs both); it verifies.
#pragma once

#include "ir/Module.h"

#include "llvm/Support/Error.h"

#include <map>
#include <string>

namespace minfer {

struct FuseStats {
  std::map<std::string, int> fired; // rule name -> times applied (over the ops of the module, not per layer)
};

// Rewrites `m` in place; verifies the result (a failure there is a bug in a rule, reported as an error).
llvm::Expected<FuseStats> fuseModule(ir::Module &m);

} // namespace minfer
