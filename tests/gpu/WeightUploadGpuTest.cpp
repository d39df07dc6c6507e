// tests/gpu/WeightUploadGpuTest.cpp — the engine's weight upload against the host's definition of it.
//
// The engine reads checkpoint bytes with pread into page-locked staging buffers, converts f16 to bf16 there,
// and lays packed weights' rows out with device copies; streamWeight (io/WeightLoader.h) does all of it on
// the host, row by row, and is the reference: every weight buffer on the device must equal its bytes.
#include "common/GoldenReference.h"
#include "common/TestFiles.h"
#include "gpu/GpuHarness.h"

#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "compiler/kernels/Gemv.h"
#include "io/Safetensors.h"
#include "io/WeightLoader.h"
#include "runtime/Autotune.h"
#include "runtime/Engine.h"
#include "runtime/Session.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <iostream>

using namespace minfer;

namespace {

// Every Weight buffer of `model`'s plan, read back from the device, against streamWeight's bytes. Returns
// how many buffers had their f16 converted (stored f16, loaded bf16) and how many had their rows reordered.
void expectDeviceWeightsMatchTheHost(const std::string &model, int &converted, int &reordered) {
  rt::EngineOptions eo;
  auto engine = rt::Engine::load(model, eo);
  ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
  auto ckpt = Checkpoint::open(model);
  ASSERT_TRUE(bool(ckpt)) << llvm::toString(ckpt.takeError());
  const ir::Module &m = (*engine)->module();
  const Plan &plan = (*engine)->plan();
  int weights = 0, withGains = 0;
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const PlanBuffer &b = plan.buffers[i];
    if (b.kind != BufferKind::Weight) continue;
    ++weights;
    const ir::WeightDecl &w = m.weights[b.weight];
    const int64_t rows = w.type.shape[0].value;
    std::vector<int64_t> order = rowOrder(b, rows);
    std::vector<uint8_t> want(static_cast<size_t>(b.fixedBytes));
    auto sink = [&](llvm::ArrayRef<uint8_t> bytes, size_t offset) -> llvm::Error {
      std::memcpy(want.data() + offset, bytes.data(), bytes.size());
      return llvm::Error::success();
    };
    // Gains riding in W (Plan.h PlanBuffer::gains): the host multiplies them in as it converts (its own test
    // holds that to an fp32 reference: RuntimeTest's StreamWeight.ColumnGains...).
    std::vector<float> gains;
    if (b.gains >= 0) {
      auto values = loadWeightF32(m, *ckpt, plan.buffers[b.gains].weight, plan.buffers[b.gains].layer);
      ASSERT_TRUE(bool(values)) << llvm::toString(values.takeError());
      gains = std::move(*values);
      ++withGains;
    }
    ASSERT_FALSE(bool(streamWeight(m, *ckpt, b.weight, b.layer, b.dtype, 1 << 20, sink, order, nullptr, gains)))
        << b.name;
    std::vector<uint8_t> got(want.size());
    MINFER_ASSERT_OK(cuda::copyDeviceToHost(got.data(), (*engine)->weightPointer(static_cast<int>(i)), got.size(), nullptr));
    MINFER_ASSERT_OK(cuda::synchronize());
    ASSERT_EQ(got, want) << "weight buffer " << b.name << " differs from the host's conversion and layout";
    auto parts = storedParts(m, *ckpt, b.weight, b.layer);
    ASSERT_TRUE(bool(parts)) << llvm::toString(parts.takeError());
    converted += (*parts)[0].dtype != b.dtype;
    reordered += !order.empty();
  }
  EXPECT_GT(weights, 0);
  std::cout << "[ upload ] " << model << ": " << weights << " weights, " << withGains << " with a norm's gains\n";
}

TEST(WeightUpload, EveryWeightOfEveryFixtureIsTheHostsBytes) {
  MINFER_REQUIRE_GPU();
  for (const char *name : test::kFixtures) {
    SCOPED_TRACE(name);
    int converted = 0, reordered = 0;
    expectDeviceWeightsMatchTheHost(test::fixtureDir(name), converted, reordered);
  }
}

// llama_gqa's weights as f16 (times 3, so that most change when rounded to bf16): converted on the way up in
// the staging buffers, the packed qkv and gate/up ones too, to what the host's converter gives.
TEST(WeightUpload, AnF16CheckpointIsConvertedAsTheHostConvertsIt) {
  MINFER_REQUIRE_GPU();
  const std::string dir = test::fixtureDir("llama_gqa");
  GPU_TRY(ckpt, Checkpoint::open(dir + "/model.safetensors"));
  test::TempDir tmp;
  ASSERT_FALSE(llvm::sys::fs::copy_file(dir + "/config.json", tmp.file("config.json")));
  std::vector<OwnedTensor> tensors;
  for (const std::string &name : ckpt.names()) {
    Checkpoint::Ref r = *ckpt.find(name);
    GPU_TRY(values, readAsFloat32(*r.file, *r.info));
    OwnedTensor t{name, StDType::F16, r.info->shape, std::vector<uint8_t>(values.size() * 2)};
    for (size_t i = 0; i < values.size(); ++i) {
      uint16_t h = floatToF16(values[i] * 3.0f);
      std::memcpy(&t.data[2 * i], &h, 2);
    }
    tensors.push_back(std::move(t));
  }
  std::string bytes;
  llvm::raw_string_ostream os(bytes);
  MINFER_ASSERT_OK(writeSafetensors(os, tmp.file("model.safetensors"), tensors));
  os.flush();
  test::writeFile(tmp.file("model.safetensors"), bytes);
  int converted = 0, reordered = 0;
  expectDeviceWeightsMatchTheHost(tmp.path(), converted, reordered);
  EXPECT_GT(converted, 0) << "no weight went through the f16 -> bf16 conversion";
  EXPECT_GT(reordered, 0) << "no packed weight had its rows laid out on the device";
}

// EngineOptions::syntheticWeights (minferc autotune --in-step without --weights): no checkpoint is read; every
// weight buffer holds pseudo-random values of its element type within [-0.035, 0.035], not a repeated word
// (the tuner times the model on them, and a repeated value draws less power on tensor cores), two buffers of
// the same type differ where they overlap; and each fixture's model runs a prefill and greedy decode steps on
// them with every logit finite.
TEST(WeightUpload, SyntheticWeightsFillEveryBufferAndTheModelRunsFinite) {
  MINFER_REQUIRE_GPU();
  for (const char *name : test::kFixtures) {
    SCOPED_TRACE(name);
    test::TempDir tmp; // the config alone: the engine must not look for model.safetensors
    ASSERT_FALSE(llvm::sys::fs::copy_file(test::fixtureDir(name) + "/config.json", tmp.file("config.json")));
    rt::EngineOptions eo;
    eo.syntheticWeights = true;
    auto engine = rt::Engine::load(tmp.path(), eo);
    ASSERT_TRUE(bool(engine)) << llvm::toString(engine.takeError());
    const Plan &plan = (*engine)->plan();
    int weights = 0;
    std::map<ir::DType, std::vector<float>> firstOfType; // the first 64 values of the first buffer of each type
    for (size_t i = 0; i < plan.buffers.size(); ++i) {
      const PlanBuffer &b = plan.buffers[i];
      if (b.kind != BufferKind::Weight) continue;
      ++weights;
      const size_t elementBytes = b.dtype == ir::DType::F32 ? 4 : 2;
      const size_t count = std::min<size_t>(64, static_cast<size_t>(b.fixedBytes) / elementBytes);
      // The buffer's first and last `count` elements.
      for (size_t from : {size_t(0), static_cast<size_t>(b.fixedBytes) / elementBytes - count}) {
        std::vector<uint8_t> raw(count * elementBytes);
        const cuda::DevicePtr at = (*engine)->weightPointer(static_cast<int>(i)) + from * elementBytes;
        MINFER_ASSERT_OK(cuda::copyDeviceToHost(raw.data(), at, raw.size(), nullptr));
        MINFER_ASSERT_OK(cuda::synchronize());
        std::vector<float> values(count);
        for (size_t e = 0; e < count; ++e) {
          uint16_t h;
          std::memcpy(&h, raw.data() + e * elementBytes, 2);
          if (b.dtype == ir::DType::F32) std::memcpy(&values[e], raw.data() + 4 * e, 4);
          else values[e] = b.dtype == ir::DType::F16 ? f16ToFloat(h) : bf16ToFloat(h);
        }
        size_t outside = 0;
        for (float v : values) outside += !(std::abs(v) <= 0.0352f); // 0.035, rounded to f16 or bf16
        EXPECT_EQ(outside, 0u) << b.name << " at element " << from << ": values outside [-0.035, 0.035]";
        std::vector<float> sorted = values;
        std::sort(sorted.begin(), sorted.end());
        const size_t distinct = size_t(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
        EXPECT_GE(distinct, count / 2) << b.name << " at element " << from << ": " << distinct << " distinct values of "
                                       << count;
        if (from != 0) continue;
        auto [it, first] = firstOfType.try_emplace(b.dtype, values);
        if (!first && count == it->second.size()) {
          EXPECT_NE(values, it->second) << b.name << " starts with the same values as an earlier buffer";
        }
      }
    }
    EXPECT_GT(weights, 0);
    rt::SessionOptions so;
    so.keepLogits = true;
    auto session = rt::Session::create(**engine, so);
    ASSERT_TRUE(bool(session)) << llvm::toString(session.takeError());
    rt::GenerateOptions go;
    go.maxNewTokens = 6;
    auto g = (*session)->generate({{1, 2, 3, 4, 5}}, go);
    ASSERT_TRUE(bool(g)) << llvm::toString(g.takeError());
    ASSERT_EQ(g->tokens.size(), 1u);
    EXPECT_EQ(g->tokens[0].size(), 6u);
    for (int32_t t : g->tokens[0]) EXPECT_TRUE(t >= 0 && t < (*engine)->vocab()) << t;
    ASSERT_EQ(g->logits.size(), 1u);
    ASSERT_FALSE(g->logits[0].empty());
    size_t bad = 0;
    for (float v : g->logits[0]) bad += !std::isfinite(v);
    EXPECT_EQ(bad, 0u) << "of " << g->logits[0].size() << " logits";
  }
}

} // namespace

namespace {

// EngineOptions::weightsFrom (the in-step tuner's configurations): an engine whose plan holds every weight and
// constant as the donor's shares its device memory, also once the donor is gone, and generates the donor's
// tokens; one whose plan lays them out otherwise (a rotation table of other positions, the unfused plan's W
// without the norms' gains), or whose weights are synthetic, loads its own.
TEST(WeightUpload, AnEngineSharesTheWeightsOfOneThatLaysThemOutAlike) {
  MINFER_REQUIRE_GPU();
  const std::string dir = test::fixtureDir("llama_gqa");
  auto tokensOf = [](rt::Engine &engine) -> std::vector<int32_t> {
    auto session = rt::Session::create(engine);
    if (!session) {
      ADD_FAILURE() << llvm::toString(session.takeError());
      return {};
    }
    rt::GenerateOptions go;
    go.maxNewTokens = 8;
    auto g = (*session)->generate({{1, 2, 3, 4, 5}}, go);
    if (!g) {
      ADD_FAILURE() << llvm::toString(g.takeError());
      return {};
    }
    return g->tokens.at(0);
  };
  auto weightPointers = [](const rt::Engine &engine) {
    std::vector<cuda::DevicePtr> out;
    for (size_t i = 0; i < engine.plan().buffers.size(); ++i)
      if (inWeightMemory(engine.plan().buffers[i])) out.push_back(engine.weightPointer(static_cast<int>(i)));
    return out;
  };
  rt::EngineOptions eo;
  eo.plan.maxSeq = 64;
  eo.tuned = false; // the default tiles, whatever this machine's database holds
  GPU_TRY(donor, rt::Engine::load(dir, eo));
  EXPECT_FALSE(donor->stats().weightsShared);
  const std::vector<int32_t> want = tokensOf(*donor);
  ASSERT_EQ(want.size(), 8u);

  // Another tile of the same kind for a decode gemv, as the in-step tuner plants one: the same weights.
  GPU_TRY(fp, rt::deviceFingerprint());
  TuningDb planted;
  planted.device = fp;
  std::string movedTo;
  for (const PlannedLaunch &l : donor->plan().decode.launches) {
    const auto *gemv = dynamic_cast<const GemvSpec *>(donor->plan().kernels[l.kernel].get());
    if (!gemv || !movedTo.empty()) continue;
    for (const auto &c : gemv->tuningCandidates(donor->plan().target, 1)) {
      const auto &other = static_cast<const GemvSpec &>(*c);
      if (other.tile.wgmma == gemv->tile.wgmma && other.tile.mma == gemv->tile.mma && !(other.tile == gemv->tile)) {
        TuningEntry e;
        e.tile = movedTo = other.tileName();
        e.us = 1;
        planted.entries[TuningDb::entryKey(gemv->tuningKey(), "decode:1")] = e;
        break;
      }
    }
  }
  ASSERT_FALSE(movedTo.empty()) << "no decode gemv of the fixture has another tile of its kind";
  rt::EngineOptions retiled = eo;
  retiled.tuned = true;
  retiled.tuning = planted;
  retiled.weightsFrom = donor.get();
  GPU_TRY(sharer, rt::Engine::load(dir, retiled));
  bool hasIt = false;
  for (const auto &k : sharer->plan().kernels) hasIt = hasIt || k->tileName() == movedTo;
  EXPECT_TRUE(hasIt) << movedTo << ": the planted tile is not in the plan";
  EXPECT_TRUE(sharer->stats().weightsShared);
  EXPECT_EQ(weightPointers(*sharer), weightPointers(*donor));
  EXPECT_EQ(sharer->stats().weightBytes, donor->stats().weightBytes);
  const size_t weightBytes = static_cast<size_t>(donor->stats().weightBytes);
  donor.reset(); // the memory stays the sharer's
  // Were it freed with the donor, the driver would hand it out again (it keeps freed memory mapped, so reading
  // a dangling pointer would still give the old bytes): take as much and poison it, then generate.
  GPU_TRY(poison, cuda::DeviceBuffer::alloc(weightBytes));
  MINFER_ASSERT_OK(poison.fill(0xFF)); // bf16 NaNs
  EXPECT_EQ(tokensOf(*sharer), want);

  // A rotation table of other positions: its own weights, the same tokens.
  rt::EngineOptions shorter = eo;
  shorter.plan.maxSeq = 48;
  shorter.weightsFrom = sharer.get();
  GPU_TRY(own, rt::Engine::load(dir, shorter));
  EXPECT_FALSE(own->stats().weightsShared);
  EXPECT_NE(weightPointers(*own), weightPointers(*sharer));
  EXPECT_EQ(tokensOf(*own), want);

  // Unfused: no norm's gains ride in W.
  rt::EngineOptions unfused = eo;
  unfused.fuse = false;
  unfused.weightsFrom = sharer.get();
  GPU_TRY(plain, rt::Engine::load(dir, unfused));
  EXPECT_FALSE(plain->stats().weightsShared);
  EXPECT_EQ(tokensOf(*plain), want);

  // Synthetic weights never take a checkpoint's, nor the other way round.
  rt::EngineOptions synthetic = eo;
  synthetic.syntheticWeights = true;
  synthetic.weightsFrom = sharer.get();
  GPU_TRY(filled, rt::Engine::load(dir, synthetic));
  EXPECT_FALSE(filled->stats().weightsShared);
  rt::EngineOptions real = eo;
  real.weightsFrom = filled.get();
  GPU_TRY(fromCheckpoint, rt::Engine::load(dir, real));
  EXPECT_FALSE(fromCheckpoint->stats().weightsShared);
  EXPECT_EQ(tokensOf(*fromCheckpoint), want);
}

} // namespace
