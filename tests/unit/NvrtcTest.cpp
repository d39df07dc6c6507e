// tests/unit/NvrtcTest.cpp — the NVRTC driver without a GPU: targets, lowered names, cubin arch, errors.
//
// The kernels are inline templates in the source text (no embedded template needed), so these tests hold
// while templates/ changes; each NVRTC compile of one takes well under a second on one core.
#include "jit/Nvrtc.h"
#include "jit/Target.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "common/TestFiles.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <fstream>
#include <optional>

using namespace minfer;
using test::ScopedEnv;
using test::TempDir;
using test::scaleKernel;
using test::target;

namespace {

} // namespace

TEST(Nvrtc, VersionLooksLikeMajorDotMinor) {
  std::string v = nvrtcVersion();
  llvm::StringRef major, minor;
  std::tie(major, minor) = llvm::StringRef(v).split('.');
  unsigned a = 0, b = 0;
  EXPECT_FALSE(major.getAsInteger(10, a)) << v;
  EXPECT_FALSE(minor.getAsInteger(10, b)) << v;
  EXPECT_GE(a, 12u) << "minfer needs NVRTC 12 or later, found " << v;
}

TEST(Nvrtc, CompilesTemplateKernelForAmpereAdaHopper) {
  for (llvm::StringRef t : {"sm_80", "sm_89", "sm_90", "sm_90a"}) {
    SCOPED_TRACE(t.str());
    Target tgt = target(t);
    llvm::Expected<CompiledKernel> k = compileKernel(scaleKernel("scale_f32_x3"), tgt);
    ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
    EXPECT_EQ(k->name, "scale_f32_x3");
    EXPECT_EQ(k->loweredName, "_Z5scaleILi3EEvPf"); // scale<3>(float*), Itanium-mangled
    ASSERT_FALSE(k->cubin.empty());
    EXPECT_EQ(cubinSmVersion(k->cubin), tgt.smVersion());
    // PTX is kept for every target, the arch-specific ones included.
    EXPECT_NE(k->ptx.find(".target " + tgt.name), std::string::npos) << k->ptx.substr(0, 400);
  }
}

TEST(Nvrtc, FindsCudaHeaders) {
  KernelSource src{"bf16_roundtrip",
                   "#include <cuda_bf16.h>\n"
                   "template <int N> __global__ void roundtrip(__nv_bfloat16 *p) {\n"
                   "  p[threadIdx.x] = __float2bfloat16_rn(__bfloat162float(p[threadIdx.x]) * N);\n"
                   "}\n",
                   "roundtrip<2>", {}};
  llvm::Expected<CompiledKernel> k = compileKernel(src, target("sm_89"));
  ASSERT_TRUE(bool(k)) << llvm::toString(k.takeError());
  EXPECT_FALSE(k->cubin.empty());
}

TEST(Nvrtc, EveryValidTargetIsAcceptedByThisNvrtc) {
  for (llvm::StringRef t : validTargets()) {
    llvm::Expected<std::vector<std::string>> o = nvrtcOptions(target(t), {});
    ASSERT_TRUE(bool(o)) << t.str() << ": " << llvm::toString(o.takeError());
    EXPECT_EQ(o->front(), "--gpu-architecture=" + t.str());
    for (const std::string &opt : *o) EXPECT_EQ(opt.find("fast_math"), std::string::npos) << opt;
  }
}

TEST(Nvrtc, LineInfoIsAnOption) {
  CompileOptions opts;
  opts.lineInfo = true;
  llvm::Expected<std::vector<std::string>> o = nvrtcOptions(target("sm_90"), opts);
  ASSERT_TRUE(bool(o)) << llvm::toString(o.takeError());
  EXPECT_NE(std::find(o->begin(), o->end(), "-lineinfo"), o->end());
}

// The device's own target: Hopper gets sm_90a (wgmma), the others their plain sm_XY; each parses, and only
// sm_90a has the wgmma kernels.
TEST(Target, DevicesGetTheirArchSpecificTargetOnHopper) {
  EXPECT_EQ(deviceTargetName(9, 0), "sm_90a");
  EXPECT_EQ(deviceTargetName(8, 9), "sm_89");
  EXPECT_EQ(deviceTargetName(8, 0), "sm_80");
  EXPECT_EQ(deviceTargetName(10, 0), "sm_100");
  EXPECT_TRUE(target(deviceTargetName(9, 0)).hasWgmma());
  EXPECT_FALSE(target("sm_90").hasWgmma());
  EXPECT_FALSE(target(deviceTargetName(10, 0)).hasWgmma());
}

TEST(Target, ParsesArchitectures) {
  Target h = target("sm_90a");
  EXPECT_EQ(h.smVersion(), 90);
  EXPECT_TRUE(h.archSpecific);
  Target a = target("sm_86");
  EXPECT_EQ(a.major, 8);
  EXPECT_EQ(a.minor, 6);
  EXPECT_FALSE(a.archSpecific);
  Target b = target("sm_100");
  EXPECT_EQ(b.major, 10);
  EXPECT_EQ(b.minor, 0);
  EXPECT_EQ(b.smVersion(), 100);
}

TEST(Target, UnknownTargetListsValidOnes) {
  for (llvm::StringRef bad : {"sm_75", "sm89", "compute_90", "", "sm_90b"}) {
    llvm::Expected<Target> t = parseTarget(bad);
    ASSERT_FALSE(bool(t)) << bad.str();
    std::string msg = llvm::toString(t.takeError());
    EXPECT_NE(msg.find("'" + bad.str() + "'"), std::string::npos) << msg;
    for (llvm::StringRef valid : validTargets()) EXPECT_NE(msg.find(valid.str()), std::string::npos) << msg;
  }
}

TEST(Nvrtc, SyntaxErrorCarriesNameLogAndDumpedSource) {
  TempDir dumps;
  CompileOptions opts;
  opts.dumpDir = dumps.path();
  KernelSource src{"broken_kernel_k7",
                   "template <int N> __global__ void broken(float *p) { p[0] = undeclared_thing_42; }\n",
                   "broken<1>", {}};
  llvm::Expected<CompiledKernel> k = compileKernel(src, target("sm_80"), opts);
  ASSERT_FALSE(bool(k));
  std::string msg = llvm::toString(k.takeError());
  EXPECT_NE(msg.find("broken_kernel_k7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("undeclared_thing_42"), std::string::npos) << "NVRTC's log is missing:\n" << msg;
  std::string dumped = dumps.path() + "/broken_kernel_k7.cu";
  EXPECT_NE(msg.find(dumped), std::string::npos) << msg;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf = llvm::MemoryBuffer::getFile(dumped);
  ASSERT_TRUE(bool(buf)) << dumped;
  EXPECT_EQ((*buf)->getBuffer(), src.text);
}

TEST(Nvrtc, CudaHomeIsPreferredAndABadOneFallsBack) {
  TempDir fake;
  std::string inc = fake.path() + "/include";
  ASSERT_FALSE(llvm::sys::fs::create_directories(inc));
  std::ofstream(inc + "/cuda_bf16.h") << "// stand-in\n";
  {
    ScopedEnv home("CUDA_HOME", fake.path());
    llvm::Expected<std::string> dir = cudaIncludeDir();
    ASSERT_TRUE(bool(dir)) << llvm::toString(dir.takeError());
    llvm::SmallString<256> real;
    ASSERT_FALSE(llvm::sys::fs::real_path(inc, real));
    EXPECT_EQ(*dir, std::string(real));
  }
  {
    ScopedEnv home("CUDA_HOME", fake.path() + "/nowhere");
    llvm::Expected<std::string> dir = cudaIncludeDir(); // the build-time toolkit or libnvrtc's
    ASSERT_TRUE(bool(dir)) << llvm::toString(dir.takeError());
    EXPECT_TRUE(llvm::sys::fs::exists(*dir + "/cuda_bf16.h")) << *dir;
  }
}

TEST(Nvrtc, MissingCudaHeadersListEveryPlaceLooked) {
  TempDir empty;
  llvm::Expected<std::string> dir =
      findCudaIncludeDir({{empty.path(), "$CUDA_HOME/include"}, {empty.path() + "/gone", "next to libnvrtc"}});
  ASSERT_FALSE(bool(dir));
  std::string msg = llvm::toString(dir.takeError());
  EXPECT_NE(msg.find("cuda_bf16.h"), std::string::npos) << msg;
  EXPECT_NE(msg.find("$CUDA_HOME/include"), std::string::npos) << msg;
  EXPECT_NE(msg.find(empty.path() + "/gone (next to libnvrtc)"), std::string::npos) << msg;
}

TEST(Nvrtc, CubinArchRejectsNonElf) {
  std::vector<char> junk(128, 'x');
  EXPECT_EQ(cubinSmVersion(junk), std::nullopt);
  EXPECT_EQ(cubinSmVersion({}), std::nullopt);
  EXPECT_EQ(cubinRegisters(junk), std::nullopt);
  EXPECT_EQ(cubinRegisters({}), std::nullopt);
}

// A CUDA ELF holding nothing but a section-name table and a .nv.info section of the given bytes.
std::vector<char> cudaElfWithNvInfo(const std::vector<uint8_t> &info) {
  static const char names[] = "\0.shstrtab\0.nv.info"; // offsets 1 and 11; 20 bytes with the last NUL
  Elf64_Ehdr h{};
  std::memcpy(h.e_ident, ELFMAG, SELFMAG);
  h.e_ident[EI_CLASS] = ELFCLASS64;
  h.e_ident[EI_DATA] = ELFDATA2LSB;
  h.e_machine = EM_CUDA;
  h.e_shentsize = sizeof(Elf64_Shdr);
  h.e_shnum = 3;
  h.e_shstrndx = 1;
  const size_t namesAt = sizeof(h), infoAt = namesAt + sizeof(names);
  h.e_shoff = (infoAt + info.size() + 7) / 8 * 8;
  Elf64_Shdr sections[3] = {};
  sections[1].sh_name = 1; // ".shstrtab"
  sections[1].sh_offset = namesAt;
  sections[1].sh_size = sizeof(names);
  sections[2].sh_name = 11; // ".nv.info"
  sections[2].sh_offset = infoAt;
  sections[2].sh_size = info.size();
  std::vector<char> elf(h.e_shoff + sizeof(sections));
  std::memcpy(elf.data(), &h, sizeof(h));
  std::memcpy(elf.data() + namesAt, names, sizeof(names));
  std::memcpy(elf.data() + infoAt, info.data(), info.size());
  std::memcpy(elf.data() + h.e_shoff, sections, sizeof(sections));
  return elf;
}

// The registers come from EIATTR_REGCOUNT (attribute 0x2f, a sized value: symbol index, then count) among
// sized and 16-bit attributes (the bytes as NVRTC 13 lays them out); the most where there are several; none
// where the walk ends before it.
TEST(Nvrtc, CubinRegistersReadsTheRegisterCountAttribute) {
  const std::vector<uint8_t> sized = {0x04, 0x11, 0x08, 0x00, 1, 0, 0, 0, 0, 0, 0, 0}; // another sized attribute
  const std::vector<uint8_t> small = {0x03, 0x1b, 0xff, 0x00, 0x02, 0x4c, 0x01, 0x00}; // 16-bit values
  const std::vector<uint8_t> regs97 = {0x04, 0x2f, 0x08, 0x00, 3, 0, 0, 0, 97, 0, 0, 0};
  const std::vector<uint8_t> regs40 = {0x04, 0x2f, 0x08, 0x00, 4, 0, 0, 0, 40, 0, 0, 0};
  auto join = [](std::initializer_list<std::vector<uint8_t>> parts) {
    std::vector<uint8_t> all;
    for (const auto &p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  };
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({sized, small, regs97}))), 97);
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({regs40, sized, regs97, small}))), 97);
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({sized, small}))), std::nullopt);
  // A sized attribute longer than what is left, or a format of unknown length, ends the walk.
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({{0x04, 0x11, 0x40, 0x00}, regs97}))), std::nullopt);
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({{0x01, 0x11, 0x00, 0x00}, regs97}))), std::nullopt);
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(join({{0x07, 0x11}, regs97}))), std::nullopt);
  std::vector<uint8_t> cut = regs97;
  cut.pop_back();
  EXPECT_EQ(cubinRegisters(cudaElfWithNvInfo(cut)), std::nullopt);
}

// On NVRTC's own cubins: a kernel held to 32 registers by its launch bounds reports at most that, and one
// that keeps 64 accumulators live at least that many; a cubin cut short anywhere never reads past its end.
TEST(Nvrtc, CubinRegistersOfCompiledKernels) {
  KernelSource bounded{"bounded",
                       "template <int N> __global__ void __launch_bounds__(1024, 2) bounded(float *p) {\n"
                       "  p[threadIdx.x] *= N;\n"
                       "}\n",
                       "bounded<2>",
                       {}};
  KernelSource wide{"wide",
                    "template <int N> __global__ void wide(const float *x, float *y) {\n"
                    "  float acc[64];\n"
                    "#pragma unroll\n"
                    "  for (int i = 0; i < 64; ++i) acc[i] = x[i * blockDim.x + threadIdx.x];\n"
                    "  for (int k = 0; k < 1000; ++k)\n"
                    "#pragma unroll\n"
                    "    for (int i = 0; i < 64; ++i) acc[i] = acc[i] * acc[(i + 1) % 64] + 1.f;\n"
                    "#pragma unroll\n"
                    "  for (int i = 0; i < 64; ++i) y[i * blockDim.x + threadIdx.x] = acc[i];\n"
                    "}\n",
                    "wide<1>", {}};
  Target tgt = target("sm_90a");
  auto b = compileKernel(bounded, tgt);
  ASSERT_TRUE(bool(b)) << llvm::toString(b.takeError());
  std::optional<int> few = cubinRegisters(b->cubin);
  ASSERT_TRUE(few.has_value());
  EXPECT_GT(*few, 0);
  EXPECT_LE(*few, 32);
  auto w = compileKernel(wide, tgt);
  ASSERT_TRUE(bool(w)) << llvm::toString(w.takeError());
  std::optional<int> many = cubinRegisters(w->cubin);
  ASSERT_TRUE(many.has_value());
  EXPECT_GE(*many, 64);
  EXPECT_LE(*many, 255);
  for (size_t n = 0; n < w->cubin.size(); n += 61) {
    std::optional<int> r = cubinRegisters(llvm::ArrayRef<char>(w->cubin.data(), n));
    if (r) {
      EXPECT_EQ(*r, *many) << "cut at " << n;
    }
  }
}
