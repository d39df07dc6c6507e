// io/HFImport.cpp — config.json → IR text for the Llama family (Llama, Mistral, Qwen2) and GPT-2.
#include "io/HFImport.h"
#include "ir/Json.h"

#include "ir/Limits.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace minfer {
namespace {

// Typed, strict access to config.json fields: a wrong type is an error naming the field.
class Config {
public:
  Config(const llvm::json::Object &o, llvm::StringRef path) : obj(o), path(path.str()) {}

  llvm::Error fail(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), path + ": " + msg);
  }
  // The field's value; null when it is absent or JSON null.
  const llvm::json::Value *value(llvm::StringRef key) const {
    const llvm::json::Value *v = obj.get(key);
    return v && v->kind() != llvm::json::Value::Null ? v : nullptr;
  }
  bool has(llvm::StringRef key) const { return value(key) != nullptr; }
  // A positive integer of at most `max` (ir/Limits.h: far above what a GPU holds, so sizes derived from
  // it cannot overflow).
  llvm::Expected<int64_t> integer(llvm::StringRef key, std::optional<int64_t> fallback = std::nullopt,
                                  int64_t max = ir::limits::kMaxDim) const {
    const llvm::json::Value *v = value(key);
    if (!v) return fallback ? llvm::Expected<int64_t>(*fallback) : fail("missing field '" + key + "' (an integer)");
    auto i = v->getAsInteger();
    if (!i) return fail("field '" + key + "' must be an integer");
    if (*i <= 0) return fail("field '" + key + "' must be positive, got " + std::to_string(*i));
    if (*i > max)
      return fail("field '" + key + "' is " + std::to_string(*i) + ", above minfer's limit of " + std::to_string(max));
    return *i;
  }
  llvm::Expected<double> number(llvm::StringRef key, std::optional<double> fallback = std::nullopt) const {
    const llvm::json::Value *v = value(key);
    if (!v) return fallback ? llvm::Expected<double>(*fallback) : fail("missing field '" + key + "' (a number)");
    auto d = v->getAsNumber();
    if (!d || !std::isfinite(*d)) return fail("field '" + key + "' must be a number");
    return *d;
  }
  llvm::Expected<bool> boolean(llvm::StringRef key, bool fallback) const {
    const llvm::json::Value *v = value(key);
    if (!v) return fallback;
    auto b = v->getAsBoolean();
    if (!b) return fail("field '" + key + "' must be true or false");
    return *b;
  }
  llvm::Expected<std::string> string(llvm::StringRef key, llvm::StringRef fallback) const {
    const llvm::json::Value *v = value(key);
    if (!v) return fallback.str();
    auto s = v->getAsString();
    if (!s) return fail("field '" + key + "' must be a string");
    return s->str();
  }
  llvm::Expected<const llvm::json::Object *> object(llvm::StringRef key) const {
    const llvm::json::Value *v = value(key);
    if (!v) return nullptr;
    const llvm::json::Object *o = v->getAsObject();
    if (!o) return fail("field '" + key + "' must be an object or null");
    return o;
  }
  // transformers v5 lists each layer's attention kind in `layer_types`; minfer has full attention only.
  llvm::Error onlyFullAttention() const {
    const llvm::json::Value *v = obj.get("layer_types");
    if (!v || v->kind() == llvm::json::Value::Null) return llvm::Error::success();
    const llvm::json::Array *arr = v->getAsArray();
    if (!arr) return fail("field 'layer_types' must be a list");
    for (size_t i = 0; i < arr->size(); ++i) {
      auto s = (*arr)[i].getAsString();
      if (!s || *s != "full_attention")
        return fail("layer_types[" + std::to_string(i) + "] is not \"full_attention\"; minfer has no sliding-window attention");
    }
    return llvm::Error::success();
  }
  std::string modelName() const {
    llvm::StringRef dir = llvm::sys::path::parent_path(path);
    llvm::StringRef name = llvm::sys::path::filename(dir);
    return name.empty() || name == "." ? std::string("model") : name.str();
  }
  Config sub(const llvm::json::Object &o, llvm::StringRef key) const { return Config(o, path + ": " + key.str()); }

private:
  const llvm::json::Object &obj;
  std::string path;
};

#define TRY(var, expr)                                                                                       \
  auto var##OrErr = (expr);                                                                                  \
  if (!var##OrErr) return var##OrErr.takeError();                                                            \
  auto var = std::move(*var##OrErr)

// Element type names as the IR spells them.
llvm::Expected<std::string> configDType(const Config &c) {
  TRY(name, c.string("dtype", ""));
  if (name.empty()) {
    TRY(legacy, c.string("torch_dtype", "float32")); // transformers' default when neither is given
    name = legacy;
  }
  if (name == "bfloat16") return std::string("bf16");
  if (name == "float16") return std::string("f16");
  if (name == "float32") return std::string("f32");
  return c.fail("field 'dtype' is '" + name + "'; minfer supports bfloat16, float16 and float32 weights");
}

// Activations are bf16 whatever the weights are (DESIGN.md, Numerics); accumulation is fp32.
constexpr const char *kActivation = "bf16";

// Emits IR text, taking each weight's dtype from the checkpoint when it has the tensor.
class Writer {
public:
  Writer(const Checkpoint *ckpt, std::string fallbackDType) : ckpt(ckpt), fallback(std::move(fallbackDType)) {}

  void dim(llvm::StringRef name, int64_t v) { dims += llvm::formatv("dim {0} = {1}\n", name, v).str(); }
  // Declares @name bound to `tensor`; `shape` is the logical shape ([out, in] for matmul weights).
  void weight(llvm::StringRef name, llvm::StringRef shape, llvm::StringRef tensor, bool transposed = false) {
    std::string dt = fallback;
    std::string probe = llvm::StringRef(tensor).str();
    size_t at = probe.find("{l}");
    if (at != std::string::npos) probe.replace(at, 3, "0");
    if (ckpt)
      if (auto ref = ckpt->find(probe)) {
        llvm::StringRef st = stDTypeName(ref->info->dtype);
        dt = st == "BF16" ? "bf16" : st == "F16" ? "f16" : st == "F32" ? "f32" : fallback;
      }
    weights += llvm::formatv("weight @{0} : {1}[{2}] = {3}\"{4}\"\n", name, dt, shape,
                             transposed ? "transpose " : "", tensor)
                   .str();
  }
  std::string dims, weights;

private:
  const Checkpoint *ckpt;
  std::string fallback;
};

struct Rope {
  double theta = 10000;
  std::string schedule = "default";
  double factor = 1, low = 0, high = 0;
  int64_t originalMaxPos = 0;

  std::string attrs(llvm::StringRef heads) const {
    std::string s = llvm::formatv("heads = {0}, head_dim = head_dim, theta = {1}, style = half, schedule = {2}",
                                  heads, ir::formatFloat(theta), schedule)
                        .str();
    if (schedule == "linear") s += ", factor = " + ir::formatFloat(factor);
    if (schedule == "llama3")
      s += llvm::formatv(", factor = {0}, low_freq_factor = {1}, high_freq_factor = {2}, original_max_pos = {3}",
                         ir::formatFloat(factor), ir::formatFloat(low), ir::formatFloat(high), originalMaxPos)
               .str();
    return s;
  }
};

// rope_theta / rope_scaling (transformers v4) or rope_parameters (v5).
llvm::Expected<Rope> readRope(const Config &c) {
  Rope r;
  TRY(params, c.object("rope_parameters"));
  TRY(scaling, c.object("rope_scaling"));
  if (params && scaling) return c.fail("both 'rope_parameters' and 'rope_scaling' are given; expected one");
  const llvm::json::Object *o = params ? params : scaling;
  std::string field = params ? "rope_parameters" : "rope_scaling";
  TRY(theta, c.number("rope_theta", 10000.0));
  r.theta = theta;
  if (!o) return r;
  Config s = c.sub(*o, field);
  if (params) {
    TRY(t, s.number("rope_theta", r.theta));
    r.theta = t;
  }
  TRY(type, s.string("rope_type", ""));
  if (type.empty()) {
    TRY(legacy, s.string("type", "default"));
    type = legacy;
  }
  if (s.has("partial_rotary_factor")) {
    TRY(prf, s.number("partial_rotary_factor"));
    if (prf != 1.0) return c.fail(field + ".partial_rotary_factor is " + ir::formatFloat(prf) + "; minfer rotates whole heads only");
  }
  if (type == "default") return r;
  if (type == "linear") {
    r.schedule = "linear";
    TRY(f, s.number("factor"));
    r.factor = f;
    return r;
  }
  if (type == "llama3") {
    r.schedule = "llama3";
    TRY(f, s.number("factor"));
    TRY(low, s.number("low_freq_factor"));
    TRY(high, s.number("high_freq_factor"));
    TRY(orig, s.integer("original_max_position_embeddings"));
    r.factor = f;
    r.low = low;
    r.high = high;
    r.originalMaxPos = orig;
    return r;
  }
  return c.fail(field + ".rope_type is '" + type + "'; minfer supports default, linear and llama3");
}

llvm::Expected<std::string> activationOp(const Config &c, llvm::StringRef key, llvm::StringRef fallback) {
  TRY(act, c.string(key, fallback));
  if (act == "silu" || act == "swish") return std::string("silu");
  if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") return std::string("gelu_tanh");
  if (act == "gelu") return std::string("gelu_erf");
  if (act == "relu") return std::string("relu");
  return c.fail("field '" + key + "' is '" + act + "'; minfer supports silu, gelu, gelu_new, gelu_pytorch_tanh and relu");
}

// The model is named after its checkpoint directory.
std::string header(const Config &c) {
  return llvm::formatv("model \"{0}\"\n\n", c.modelName()).str();
}

// The end of a decoder's text after its MLP (`%mlp_out`): the layer's second residual add, the final norm
// (`finalNorm`: the op, its operands and attributes) and the lm_head (`head`: a weight), then the module
// with its header, dims and weights before the graph.
std::string finishModule(const Config &c, const Writer &w, llvm::raw_string_ostream &os, llvm::StringRef a,
                         const std::string &finalNorm, llvm::StringRef head) {
  os << llvm::formatv("    %x2 = add %x1, %mlp_out : {0}[T, hidden]\n", a);
  os << "    yield %x2\n  }\n";
  os << llvm::formatv("  %final = {1} : {0}[T, hidden]\n", a, finalNorm);
  os << llvm::formatv("  %logits = matmul %final, @{1} : {0}[T, vocab]\n", a, head);
  os << "  return %logits\n}\n";
  return header(c) + w.dims + "\n" + w.weights + "\n" + os.str();
}

llvm::Expected<std::string> importLlama(const Config &c, llvm::StringRef arch, const Checkpoint *ckpt) {
  TRY(vocab, c.integer("vocab_size"));
  TRY(hidden, c.integer("hidden_size"));
  TRY(ffn, c.integer("intermediate_size"));
  TRY(layers, c.integer("num_hidden_layers", std::nullopt, ir::limits::kMaxLayers));
  TRY(heads, c.integer("num_attention_heads", std::nullopt, ir::limits::kMaxHeads));
  TRY(kvHeads, c.integer("num_key_value_heads", heads, ir::limits::kMaxHeads));
  if (!c.has("head_dim") && hidden % heads)
    return c.fail("hidden_size " + std::to_string(hidden) + " is not a multiple of num_attention_heads " +
                  std::to_string(heads) + " and no head_dim is given");
  TRY(headDim, c.integer("head_dim", hidden / heads, ir::limits::kMaxHeadDim));
  if (heads % kvHeads)
    return c.fail("num_attention_heads " + std::to_string(heads) + " is not a multiple of num_key_value_heads " +
                  std::to_string(kvHeads));
  // transformers' defaults when the config leaves it out: Llama 2048, Mistral 4096 * 32, Qwen2 32768.
  int64_t defaultMaxPos = arch == "MistralForCausalLM" ? 131072 : arch == "Qwen2ForCausalLM" ? 32768 : 2048;
  TRY(maxPos, c.integer("max_position_embeddings", defaultMaxPos));
  TRY(eps, c.number("rms_norm_eps", 1e-6));
  TRY(act, activationOp(c, "hidden_act", "silu"));
  TRY(rope, readRope(c));
  bool qwen = arch == "Qwen2ForCausalLM";
  TRY(tied, c.boolean("tie_word_embeddings", false));
  TRY(attnBias, c.boolean("attention_bias", false));
  TRY(mlpBias, c.boolean("mlp_bias", false));
  if (c.has("sliding_window")) {
    TRY(window, c.integer("sliding_window"));
    TRY(useWindow, c.boolean("use_sliding_window", !qwen)); // Mistral always slides; Qwen2 only when asked
    if (useWindow && window < maxPos)
      return c.fail("field 'sliding_window' is " + std::to_string(window) + ", below max_position_embeddings " +
                    std::to_string(maxPos) + "; minfer has no sliding-window attention");
  }
  if (auto e = c.onlyFullAttention()) return e;
  TRY(dtype, configDType(c));

  Writer w(ckpt, dtype);
  w.dim("vocab", vocab);
  w.dim("hidden", hidden);
  w.dim("layers", layers);
  w.dim("heads", heads);
  w.dim("kv_heads", kvHeads);
  w.dim("head_dim", headDim);
  w.dim("q_dim", heads * headDim);
  w.dim("kv_dim", kvHeads * headDim);
  w.dim("ffn", ffn);
  w.dim("max_pos", maxPos);

  bool qkvBias = qwen || attnBias;
  w.weight("embed", "vocab, hidden", "model.embed_tokens.weight");
  std::string L = "model.layers.{l}.";
  w.weight("attn_norm", "hidden", L + "input_layernorm.weight");
  for (auto [name, shape, proj] : {std::tuple{"wq", "q_dim", "q_proj"}, {"wk", "kv_dim", "k_proj"}, {"wv", "kv_dim", "v_proj"}}) {
    w.weight(name, std::string(shape) + ", hidden", L + "self_attn." + proj + ".weight");
    if (qkvBias) w.weight(std::string("b") + (name + 1), shape, L + "self_attn." + proj + ".bias");
  }
  w.weight("wo", "hidden, q_dim", L + "self_attn.o_proj.weight");
  if (attnBias) w.weight("bo", "hidden", L + "self_attn.o_proj.bias");
  w.weight("mlp_norm", "hidden", L + "post_attention_layernorm.weight");
  w.weight("w_gate", "ffn, hidden", L + "mlp.gate_proj.weight");
  w.weight("w_up", "ffn, hidden", L + "mlp.up_proj.weight");
  w.weight("w_down", "hidden, ffn", L + "mlp.down_proj.weight");
  if (mlpBias) {
    w.weight("b_gate", "ffn", L + "mlp.gate_proj.bias");
    w.weight("b_up", "ffn", L + "mlp.up_proj.bias");
    w.weight("b_down", "hidden", L + "mlp.down_proj.bias");
  }
  w.weight("final_norm", "hidden", "model.norm.weight");
  if (!tied) w.weight("lm_head", "vocab, hidden", "lm_head.weight");

  std::string a = kActivation, e = ir::formatFloat(eps);
  auto bias = [](bool on, llvm::StringRef b) { return on ? (", @" + b).str() : std::string(); };
  std::string g;
  llvm::raw_string_ostream os(g);
  os << "graph(%tokens: i32[T], %positions: i32[T]) {\n";
  os << llvm::formatv("  %x0 = embedding %tokens, @embed : {0}[T, hidden]\n", a);
  os << "  %h = repeat layers (%x = %x0) {\n";
  os << llvm::formatv("    %attn_in = rms_norm %x, @attn_norm {{eps = {1}} : {0}[T, hidden]\n", a, e);
  os << llvm::formatv("    %q0 = matmul %attn_in, @wq{1} : {0}[T, q_dim]\n", a, bias(qkvBias, "bq"));
  os << llvm::formatv("    %k0 = matmul %attn_in, @wk{1} : {0}[T, kv_dim]\n", a, bias(qkvBias, "bk"));
  os << llvm::formatv("    %v = matmul %attn_in, @wv{1} : {0}[T, kv_dim]\n", a, bias(qkvBias, "bv"));
  os << llvm::formatv("    %q = rope %q0, %positions {{{1}} : {0}[T, q_dim]\n", a, rope.attrs("heads"));
  os << llvm::formatv("    %k = rope %k0, %positions {{{1}} : {0}[T, kv_dim]\n", a, rope.attrs("kv_heads"));
  os << llvm::formatv("    %attn = attention %q, %k, %v {{heads = heads, kv_heads = kv_heads, head_dim = head_dim} : {0}[T, q_dim]\n", a);
  os << llvm::formatv("    %attn_out = matmul %attn, @wo{1} : {0}[T, hidden]\n", a, bias(attnBias, "bo"));
  os << llvm::formatv("    %x1 = add %x, %attn_out : {0}[T, hidden]\n", a);
  os << llvm::formatv("    %mlp_in = rms_norm %x1, @mlp_norm {{eps = {1}} : {0}[T, hidden]\n", a, e);
  os << llvm::formatv("    %gate = matmul %mlp_in, @w_gate{1} : {0}[T, ffn]\n", a, bias(mlpBias, "b_gate"));
  os << llvm::formatv("    %up = matmul %mlp_in, @w_up{1} : {0}[T, ffn]\n", a, bias(mlpBias, "b_up"));
  os << llvm::formatv("    %act = {1} %gate : {0}[T, ffn]\n", a, act);
  os << llvm::formatv("    %gated = mul %act, %up : {0}[T, ffn]\n", a);
  os << llvm::formatv("    %mlp_out = matmul %gated, @w_down{1} : {0}[T, hidden]\n", a, bias(mlpBias, "b_down"));
  return finishModule(c, w, os, a, "rms_norm %h, @final_norm {eps = " + e + "}", tied ? "embed" : "lm_head");
}

llvm::Expected<std::string> importGPT2(const Config &c, const Checkpoint *ckpt) {
  TRY(vocab, c.integer("vocab_size"));
  TRY(hidden, c.integer("n_embd"));
  TRY(layers, c.integer("n_layer", std::nullopt, ir::limits::kMaxLayers));
  TRY(heads, c.integer("n_head", std::nullopt, ir::limits::kMaxHeads));
  TRY(maxPos, c.integer("n_positions"));
  TRY(ffn, c.integer("n_inner", 4 * hidden));
  TRY(eps, c.number("layer_norm_epsilon", 1e-5));
  TRY(act, activationOp(c, "activation_function", "gelu_new"));
  TRY(tied, c.boolean("tie_word_embeddings", true));
  TRY(scaleWeights, c.boolean("scale_attn_weights", true));
  TRY(byLayer, c.boolean("scale_attn_by_inverse_layer_idx", false));
  if (byLayer) return c.fail("field 'scale_attn_by_inverse_layer_idx' is true; minfer has no per-layer attention scale");
  if (hidden % heads)
    return c.fail("n_embd " + std::to_string(hidden) + " is not a multiple of n_head " + std::to_string(heads));
  TRY(dtype, configDType(c));

  // HF's GPT2LMHeadModel saves `transformer.`-prefixed names; the original checkpoints have none.
  std::string p = "transformer.";
  if (ckpt && !ckpt->find("transformer.wte.weight") && ckpt->find("wte.weight")) p = "";

  Writer w(ckpt, dtype);
  w.dim("vocab", vocab);
  w.dim("hidden", hidden);
  w.dim("layers", layers);
  w.dim("heads", heads);
  w.dim("head_dim", hidden / heads);
  w.dim("qkv_dim", 3 * hidden);
  w.dim("ffn", ffn);
  w.dim("max_pos", maxPos);
  w.weight("wte", "vocab, hidden", p + "wte.weight");
  w.weight("wpe", "max_pos, hidden", p + "wpe.weight");
  std::string L = p + "h.{l}.";
  w.weight("ln_1_w", "hidden", L + "ln_1.weight");
  w.weight("ln_1_b", "hidden", L + "ln_1.bias");
  w.weight("c_attn_w", "qkv_dim, hidden", L + "attn.c_attn.weight", /*transposed=*/true);
  w.weight("c_attn_b", "qkv_dim", L + "attn.c_attn.bias");
  w.weight("attn_proj_w", "hidden, hidden", L + "attn.c_proj.weight", true);
  w.weight("attn_proj_b", "hidden", L + "attn.c_proj.bias");
  w.weight("ln_2_w", "hidden", L + "ln_2.weight");
  w.weight("ln_2_b", "hidden", L + "ln_2.bias");
  w.weight("fc_w", "ffn, hidden", L + "mlp.c_fc.weight", true);
  w.weight("fc_b", "ffn", L + "mlp.c_fc.bias");
  w.weight("mlp_proj_w", "hidden, ffn", L + "mlp.c_proj.weight", true);
  w.weight("mlp_proj_b", "hidden", L + "mlp.c_proj.bias");
  w.weight("ln_f_w", "hidden", p + "ln_f.weight");
  w.weight("ln_f_b", "hidden", p + "ln_f.bias");
  if (!tied) w.weight("lm_head", "vocab, hidden", "lm_head.weight");

  std::string a = kActivation, e = ir::formatFloat(eps);
  std::string scale = scaleWeights ? "" : ", scale = 1.0";
  std::string g;
  llvm::raw_string_ostream os(g);
  os << "graph(%tokens: i32[T], %positions: i32[T]) {\n";
  os << llvm::formatv("  %tok = embedding %tokens, @wte : {0}[T, hidden]\n", a);
  os << llvm::formatv("  %pos = embedding %positions, @wpe : {0}[T, hidden]\n", a);
  os << llvm::formatv("  %x0 = add %tok, %pos : {0}[T, hidden]\n", a);
  os << "  %h = repeat layers (%x = %x0) {\n";
  os << llvm::formatv("    %attn_in = layer_norm %x, @ln_1_w, @ln_1_b {{eps = {1}} : {0}[T, hidden]\n", a, e);
  os << llvm::formatv("    %qkv = matmul %attn_in, @c_attn_w, @c_attn_b : {0}[T, qkv_dim]\n", a);
  os << llvm::formatv("    %q, %k, %v = split %qkv {{sizes = [hidden, hidden, hidden]} : {0}[T, hidden], {0}[T, hidden], {0}[T, hidden]\n", a);
  os << llvm::formatv("    %attn = attention %q, %k, %v {{heads = heads, kv_heads = heads, head_dim = head_dim{1}} : {0}[T, hidden]\n", a, scale);
  os << llvm::formatv("    %attn_out = matmul %attn, @attn_proj_w, @attn_proj_b : {0}[T, hidden]\n", a);
  os << llvm::formatv("    %x1 = add %x, %attn_out : {0}[T, hidden]\n", a);
  os << llvm::formatv("    %mlp_in = layer_norm %x1, @ln_2_w, @ln_2_b {{eps = {1}} : {0}[T, hidden]\n", a, e);
  os << llvm::formatv("    %fc = matmul %mlp_in, @fc_w, @fc_b : {0}[T, ffn]\n", a);
  os << llvm::formatv("    %act = {1} %fc : {0}[T, ffn]\n", a, act);
  os << llvm::formatv("    %mlp_out = matmul %act, @mlp_proj_w, @mlp_proj_b : {0}[T, hidden]\n", a);
  return finishModule(c, w, os, a, "layer_norm %h, @ln_f_w, @ln_f_b {eps = " + e + "}", tied ? "wte" : "lm_head");
}

const llvm::StringRef kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "GPT2LMHeadModel"};

llvm::Expected<std::string> architectureOf(const Config &c, const llvm::json::Object &o) {
  std::string supported = llvm::join(std::begin(kArchitectures), std::end(kArchitectures), ", ");
  if (const llvm::json::Value *v = o.get("architectures")) {
    const llvm::json::Array *arr = v->getAsArray();
    if (!arr || arr->size() != 1 || !(*arr)[0].getAsString())
      return c.fail("field 'architectures' must be a list of one class name");
    std::string arch = (*arr)[0].getAsString()->str();
    if (!llvm::is_contained(kArchitectures, arch))
      return c.fail("architecture '" + arch + "' is not supported; minfer imports " + supported);
    return arch;
  }
  TRY(type, c.string("model_type", ""));
  if (type == "llama") return std::string("LlamaForCausalLM");
  if (type == "mistral") return std::string("MistralForCausalLM");
  if (type == "qwen2") return std::string("Qwen2ForCausalLM");
  if (type == "gpt2") return std::string("GPT2LMHeadModel");
  return c.fail("no 'architectures' and model_type '" + type + "' is not supported; minfer imports " + supported);
}

} // namespace

llvm::Expected<std::string> importHFConfig(const llvm::json::Object &o, llvm::StringRef configPath,
                                           const Checkpoint *ckpt) {
  Config c(o, configPath);
  TRY(arch, architectureOf(c, o));
  llvm::Expected<std::string> text = arch == "GPT2LMHeadModel" ? importGPT2(c, ckpt) : importLlama(c, arch, ckpt);
  if (!text) return text.takeError();
  // Parse, verify and print: the importer's output is the canonical form of a verified module.
  auto module = ir::parseModuleString(*text, ("<import-hf " + configPath + ">").str());
  if (!module) return module.takeError();
  if (auto e = ir::verifyModule(**module)) return e;
  return ir::printModule(**module);
}

llvm::Expected<std::unique_ptr<ir::Module>> importHF(llvm::StringRef dir) {
  llvm::SmallString<256> configPath(dir);
  llvm::sys::path::append(configPath, "config.json");
  auto buf = llvm::MemoryBuffer::getFile(configPath, /*IsText=*/true);
  if (!buf)
    return llvm::createStringError(buf.getError(), "cannot read '" + configPath + "': " + buf.getError().message());
  auto json = ir::parseJson((*buf)->getBuffer());
  if (!json) return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                            configPath + ": invalid JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *obj = json->getAsObject();
  if (!obj) return llvm::createStringError(llvm::inconvertibleErrorCode(), configPath + ": expected a JSON object");

  std::optional<Checkpoint> ckpt;
  llvm::SmallString<256> single(dir), index(dir);
  llvm::sys::path::append(single, "model.safetensors");
  llvm::sys::path::append(index, "model.safetensors.index.json");
  if (llvm::sys::fs::exists(single) || llvm::sys::fs::exists(index)) {
    auto opened = Checkpoint::open(dir);
    if (!opened) return opened.takeError();
    ckpt = std::move(*opened);
  }
  auto text = importHFConfig(*obj, configPath, ckpt ? &*ckpt : nullptr);
  if (!text) return text.takeError();
  return ir::parseModuleString(*text, ("<import-hf " + dir + ">").str());
}

} // namespace minfer
