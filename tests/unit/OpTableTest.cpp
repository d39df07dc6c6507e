// tests/unit/OpTableTest.cpp — walks the op table: every op has a sample here, and each sample parses,
// verifies, prints, parses back to the same text, and runs through the interpreter.
#include "common/TestModels.h"

#include "ir/OpInfo.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

using namespace minfer;

namespace {

// One line per op producing %y : f32[T, 8] from %x : f32[T, 8] (and %positions), with @g/@b : [8],
// @w : [8, 8] available. A new op without a sample here fails OpTable.EveryOpHasASample.
const std::map<std::string, std::string> kSamples = {
    {"embedding", "%y = embedding %tokens, @w : f32[T, 8]"},
    {"layer_norm", "%y = layer_norm %x, @g, @b {eps = 1e-5} : f32[T, 8]"},
    {"rms_norm", "%y = rms_norm %x, @g {eps = 1e-6, fold = decode} : f32[T, 8]"},
    {"matmul", "%y = matmul %x, @w, @b {act = relu, scale = 2.0} : f32[T, 8]"},
    {"add", "%y = add %x, %x : f32[T, 8]"},
    {"mul", "%y = mul %x, %x : f32[T, 8]"},
    {"scale", "%y = scale %x {factor = 0.125} : f32[T, 8]"},
    {"gelu_tanh", "%y = gelu_tanh %x : f32[T, 8]"},
    {"gelu_erf", "%y = gelu_erf %x : f32[T, 8]"},
    {"silu", "%y = silu %x : f32[T, 8]"},
    {"relu", "%y = relu %x : f32[T, 8]"},
    {"rope", "%y = rope %x, %positions {heads = 2, head_dim = 4, theta = 500000.0, style = interleaved, schedule = "
             "llama3, factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_pos = 8192} : f32[T, 8]"},
    {"split", "%y, %z = split %x {sizes = [8, 0]} : f32[T, 8], f32[T, 0]"},
    {"attention", "%y = attention %x, %x, %x {heads = 4, kv_heads = 4, head_dim = 2, scale = 0.5} : f32[T, 8]"},
    // The fused ops (compiler/Fuse.cpp writes them).
    {"embedding_sum", "%y = embedding_sum %tokens, @w, %positions, @w : f32[T, 8]"},
    {"matmul_residual", "%y = matmul_residual %x, @w, %x, @b {act = gelu_tanh, scale = 0.5} : f32[T, 8]"},
    {"gated_matmul", "%z = gated_matmul %x, @w {act = silu} : f32[T, 4]"},
    {"add_rms_norm", "%s, %y = add_rms_norm %x, %x, @g {eps = 1e-6} : f32[T, 8], f32[T, 8]"},
    {"add_layer_norm", "%s, %y = add_layer_norm %x, %x, @g, @b {eps = 1e-5} : f32[T, 8], f32[T, 8]"},
    {"qkv", "%q, %k, %v = qkv %x, %positions, @w, @b {heads = 2, kv_heads = 1, head_dim = 2, rope = half, theta = "
            "10000.0, schedule = default} : f32[T, 4], f32[T, 2], f32[T, 2]\n"
            "  %z = attention %q, %k, %v {heads = 2, kv_heads = 1, head_dim = 2} : f32[T, 4]"},
};

// The samples that produce %z : f32[T, 4] rather than %y : f32[T, 8].
bool returnsZ(const std::string &op) { return op == "gated_matmul" || op == "qkv"; }

// Split's sample above is deliberately invalid (a zero size); this one is the valid form.
const char *kSplitValid = "%s1, %y = split %x {sizes = [3, 5]} : f32[T, 3], f32[T, 5]\n  %z = add %y, %y : f32[T, 5]";

std::string moduleAround(const std::string &line, const std::string &outType = "8") {
  return "model \"sample\"\n\ndim d = 8\n\nweight @w : f32[d, d] = \"w\"\nweight @g : f32[d] = \"g\"\n"
         "weight @b : f32[d] = \"b\"\n\ngraph(%tokens: i32[T], %positions: i32[T]) {\n"
         "  %x0 = embedding %tokens, @w : f32[T, d]\n  %x1 = layer_norm %x0, @g, @b {eps = 0.5} : f32[T, d]\n"
         "  %x = matmul %x1, @w, @b : f32[T, d]\n  " + line + "\n  return %" + (outType == "8" ? "y" : "z") + "\n}\n";
}

TEST(OpTable, EveryOpHasASample) {
  for (const ir::OpInfo &info : ir::allOps())
    EXPECT_TRUE(kSamples.count(info.mnemonic.str())) << "op '" << info.mnemonic.str() << "' has no sample in OpTableTest";
  EXPECT_EQ(kSamples.size(), ir::allOps().size());
}

TEST(OpTable, MnemonicsAreUniqueAndLookUpTheirRow) {
  for (const ir::OpInfo &info : ir::allOps()) {
    const ir::OpInfo *found = ir::lookupOp(info.mnemonic);
    ASSERT_NE(found, nullptr);
    EXPECT_EQ(found->kind, info.kind);
    EXPECT_EQ(&ir::opInfo(info.kind), found);
    EXPECT_FALSE(info.summary.empty()) << info.mnemonic.str();
  }
  EXPECT_EQ(ir::lookupOp("no_such_op"), nullptr);
}

TEST(OpTable, EachOpRoundTripsAndRuns) {
  for (const ir::OpInfo &info : ir::allOps()) {
    std::string name = info.mnemonic.str();
    SCOPED_TRACE("op " + name);
    std::string text = name == "split"     ? moduleAround(kSplitValid, "5")
                       : returnsZ(name) ? moduleAround(kSamples.at(name), "4")
                                        : moduleAround(kSamples.at(name));
    auto m = test::parseVerified(text);
    ASSERT_TRUE(m);
    std::string printed = ir::printModule(*m);
    auto again = test::parseVerified(printed);
    ASSERT_TRUE(again);
    EXPECT_EQ(ir::printModule(*again), printed);

    // The interpreter has a case for it: outputs come back with the declared shape and are finite.
    ir::WeightSet w = test::randomWeights(*m, 3);
    auto interp = ir::Interpreter::create(*m, w, 1, 8);
    ASSERT_TRUE(bool(interp));
    auto out = (*interp)->step(0, {1, 7, 2});
    ASSERT_TRUE(bool(out)) << llvm::toString(out.takeError());
    EXPECT_EQ(out->shape[0], 3);
    for (float v : out->data) EXPECT_TRUE(std::isfinite(v));
  }
}

// The `fused` column marks exactly the ops the fusion pass writes (DESIGN.md; compiler/Fuse.cpp).
TEST(OpTable, TheFusedColumnMarksTheFusionPassOps) {
  const std::set<llvm::StringRef> written = {"embedding_sum", "matmul_residual", "gated_matmul",
                                             "add_rms_norm",  "add_layer_norm",  "qkv"};
  for (const ir::OpInfo &info : ir::allOps())
    EXPECT_EQ(info.fused, written.count(info.mnemonic) == 1) << info.mnemonic.str();
}

// Attributes are read by their ir::Attr; each declared attribute's name, kind and enum come from Ops.def.
TEST(OpTable, AttributesAreTypedByTheTable) {
  const ir::OpInfo &mm = ir::opInfo(ir::OpKind::Matmul);
  ASSERT_TRUE(mm.declares(ir::Attr::Act));
  const ir::AttrSpec &act = mm.attrs[static_cast<size_t>(mm.attrIndex(ir::Attr::Act))];
  EXPECT_EQ(act.name, "act");
  EXPECT_EQ(act.kind, ir::AttrKind::Enum);
  EXPECT_EQ(act.enumName, "Activation");
  EXPECT_EQ(act.kindStr(), "gelu_tanh|gelu_erf|silu|relu"); // the absent value (None) is never written
  EXPECT_FALSE(mm.declares(ir::Attr::Heads));
  EXPECT_EQ(mm.attrIndex("heads"), -1);
  for (const ir::OpInfo &info : ir::allOps())
    for (const ir::AttrSpec &a : info.attrs) {
      EXPECT_EQ(ir::attrName(a.id), a.name) << info.mnemonic.str();
      EXPECT_EQ(a.kind == ir::AttrKind::Enum, !a.texts.empty()) << info.mnemonic.str() << " " << a.name.str();
    }
}

TEST(OpTable, EnumsConvertToAndFromTheirIrText) {
  EXPECT_EQ(ir::enumText(ir::Activation::GeluTanh), "gelu_tanh");
  EXPECT_EQ(ir::enumText(ir::Activation::None), "");
  EXPECT_EQ(ir::parseEnum<ir::Activation>("silu"), ir::Activation::Silu);
  EXPECT_EQ(ir::parseEnum<ir::Activation>("swiglu"), std::nullopt);
  EXPECT_EQ(ir::parseEnum<ir::Activation>(""), std::nullopt); // absent is not a text
  // The qkv rope's values are the template's ROPE numbers (templates/epilogue.cuh EpiQkv).
  EXPECT_EQ(static_cast<int>(ir::QkvRope::None), 0);
  EXPECT_EQ(static_cast<int>(ir::QkvRope::Half), 1);
  EXPECT_EQ(static_cast<int>(ir::QkvRope::Interleaved), 2);
}

TEST(OpTable, TypedAccessorsReadWhatWasParsed) {
  auto m = test::parseVerified(moduleAround(kSamples.at("matmul")));
  ASSERT_TRUE(m);
  const ir::Op *mm = nullptr;
  ir::forEachOp(*m, [&](const ir::Op &op, int64_t) {
    if (op.kind == ir::OpKind::Matmul && op.has(ir::Attr::Act)) mm = &op;
  });
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->enumAttr<ir::Activation>(ir::Attr::Act), ir::Activation::Relu);
  EXPECT_EQ(mm->floatAttr(ir::Attr::Scale), 2.0);
  // The plain matmul before it: no act reads as the enum's absent value, no scale as the fallback.
  const ir::Op *plain = nullptr;
  ir::forEachOp(*m, [&](const ir::Op &op, int64_t) {
    if (op.kind == ir::OpKind::Matmul && !op.has(ir::Attr::Act)) plain = &op;
  });
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->enumAttr<ir::Activation>(ir::Attr::Act), ir::Activation::None);
  EXPECT_EQ(plain->floatAttr(ir::Attr::Scale, 1.0), 1.0);
  // hasIfDeclared asks safely across op kinds: false for an attribute the row does not declare.
  EXPECT_TRUE(mm->hasIfDeclared(ir::Attr::Act));
  EXPECT_FALSE(plain->hasIfDeclared(ir::Attr::Heads));
  EXPECT_FALSE(plain->hasIfDeclared(ir::Attr::Act));
}

// Reading an attribute an op does not declare, or an enum as the wrong type, is a bug: the program stops
// naming both rather than reading 0.
TEST(OpTableDeathTest, UndeclaredAttributesStopTheProgram) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto m = test::parseVerified(moduleAround(kSamples.at("matmul")));
  ASSERT_TRUE(m);
  const ir::Op *mm = nullptr;
  ir::forEachOp(*m, [&](const ir::Op &op, int64_t) {
    if (op.kind == ir::OpKind::Matmul) mm = &op;
  });
  ASSERT_NE(mm, nullptr);
  EXPECT_DEATH(mm->intAttr(ir::Attr::Heads), "op 'matmul' has no attribute 'heads'");
  EXPECT_DEATH(mm->enumAttr<ir::RopeStyle>(ir::Attr::Act), "attribute 'act' of op 'matmul' is .*read as enum RopeStyle");
}

TEST(OpTable, SplitRejectsAZeroSize) {
  auto m = ir::parseModuleString(moduleAround(kSamples.at("split")), "split.ir");
  ASSERT_TRUE(bool(m));
  llvm::Error e = ir::verifyModule(**m);
  ASSERT_TRUE(bool(e));
  EXPECT_NE(llvm::toString(std::move(e)).find("split sizes must be positive, got 0"), std::string::npos);
}

} // namespace
