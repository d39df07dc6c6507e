// tests/fuzz/FuzzMain.cpp — a deterministic mutation fuzzer for every reader of untrusted input (the build
// has no libFuzzer: g++). Each target takes bytes and must answer with a value or an llvm::Error: a
// crash, a sanitizer report (the sanitizer build, CI's second leg) or a hang is a finding.
//
//   minfer_fuzz TARGET [--iterations N] [--seed S] [--dump K] SEED_FILE...
//
// Iteration i mutates one seed (chosen, like every mutation, by a splitmix64 stream of S and i) with 1 to 8
// edits: bit flips, random bytes, inserted or deleted runs, repeated runs, interesting tokens (huge and
// negative numbers, brackets, quotes), deep nesting, and splices from another seed. Runs are reproducible:
// `--dump K` writes input K to stdout instead of running, to turn a finding into a regression test.
//
// Targets: ir (parse, verify, fuse, plan for sm_90a), config (config.json -> IR), safetensors (open and
// read every tensor's header), npy, tuning (a tuning database), tokenizer (a tokenizer.json: load, encode,
// decode).
#include "common/TestFiles.h"

#include "compiler/Fuse.h"
#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "io/HFImport.h"
#include "io/Npy.h"
#include "io/Safetensors.h"
#include "io/Tokenizer.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "jit/Target.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

using namespace minfer;

namespace {

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
};

const char *const kTokens[] = {"0", "-1", "1", "2147483648", "4611686018427387904", "99999999999999999999", "1e308",
                               "-0.0", "NaN", "null", "true", "[", "]", "{", "}", "\"", "\\", ",", ":", "%", "@",
                               "{l}", "T", "S", "bf16", "\xff", "\xc3", "\xe2\x82", "\n", "\x00"};
constexpr size_t kMaxInput = 1 << 20;

std::string mutate(const std::vector<std::string> &seeds, Rng &rng) {
  std::string s = seeds[rng.below(seeds.size())];
  int edits = 1 + int(rng.below(8));
  for (int e = 0; e < edits; ++e) {
    size_t at = rng.below(s.size() + 1);
    switch (rng.below(9)) {
    case 0: // flip a bit
      if (!s.empty()) s[at % s.size()] ^= char(1 << rng.below(8));
      break;
    case 1: // a random byte
      if (!s.empty()) s[at % s.size()] = char(rng.below(256));
      break;
    case 2: { // insert random bytes
      std::string r(1 + rng.below(16), '\0');
      for (char &c : r) c = char(rng.below(256));
      s.insert(at, r);
      break;
    }
    case 3: // delete a run
      s.erase(at, 1 + rng.below(64));
      break;
    case 4: { // repeat a run
      std::string run = s.substr(at, 1 + rng.below(32));
      for (size_t k = rng.below(8); k > 0; --k) s.insert(at, run);
      break;
    }
    case 5: // an interesting token
      s.insert(at, kTokens[rng.below(std::size(kTokens))]);
      break;
    case 6: { // replace a number with an interesting one
      size_t d = s.find_first_of("0123456789", at);
      if (d == std::string::npos) break;
      size_t end = s.find_first_not_of("0123456789", d);
      s.replace(d, (end == std::string::npos ? s.size() : end) - d, kTokens[rng.below(6)]);
      break;
    }
    case 7: { // deep nesting
      size_t n = 1 + rng.below(4096);
      s.insert(at, std::string(n, rng.below(2) ? '[' : '{'));
      break;
    }
    case 8: { // splice another seed's piece
      const std::string &o = seeds[rng.below(seeds.size())];
      size_t from = rng.below(o.size() + 1);
      s.insert(at, o.substr(from, 1 + rng.below(256)));
      break;
    }
    }
    if (s.size() > kMaxInput) s.resize(kMaxInput);
  }
  return s;
}

// Each target consumes errors; only a crash or a sanitizer report can fail a run.
using FuzzTarget = std::function<void(const std::string &input, test::TempDir &tmp)>;

void ignore(llvm::Error e) { llvm::consumeError(std::move(e)); }
template <typename T> void ignore(llvm::Expected<T> v) {
  if (!v) llvm::consumeError(v.takeError());
}

const std::map<std::string, FuzzTarget> &targets() {
  static const std::map<std::string, FuzzTarget> t = {
      {"ir",
       [](const std::string &in, test::TempDir &) {
         auto m = ir::parseModuleString(in, "fuzz.ir");
         if (!m) return ignore(m.takeError());
         if (auto e = ir::verifyModule(**m)) return ignore(std::move(e));
         static const minfer::Target target = *parseTarget("sm_90a");
         PlanOptions o;
         o.maxSeq = 64; // the model's max_pos may be absent or huge; the planner's own limits are tested elsewhere
         ignore(buildPlan(**m, target, o));
         auto stats = fuseModule(**m);
         if (!stats) return ignore(stats.takeError());
         if (auto e = ir::verifyModule(**m)) return ignore(std::move(e)); // the pass must keep it valid
         ignore(buildPlan(**m, target, o));
       }},
      {"config",
       [](const std::string &in, test::TempDir &) {
         auto json = ir::parseJson(in);
         if (!json) return ignore(json.takeError());
         const llvm::json::Object *o = json->getAsObject();
         if (!o) return;
         auto text = importHFConfig(*o, "config.json", nullptr);
         if (!text) return ignore(text.takeError());
         auto m = ir::parseModuleString(*text, "imported.ir");
         if (!m) return ignore(m.takeError());
         ignore(ir::verifyModule(**m));
       }},
      {"safetensors",
       [](const std::string &in, test::TempDir &tmp) {
         auto f = SafetensorsFile::open(tmp.write("x.safetensors", in));
         if (!f) return ignore(f.takeError());
         for (const TensorInfo &t : (*f)->tensors())
           if (t.numel() <= (1 << 16)) ignore(readAsFloat32(**f, t));
       }},
      {"npy", [](const std::string &in, test::TempDir &tmp) { ignore(readNpyF32(tmp.write("x.npy", in))); }},
      {"tuning", [](const std::string &in, test::TempDir &tmp) { ignore(TuningDb::read(tmp.write("db.json", in))); }},
      {"tokenizer",
       [](const std::string &in, test::TempDir &tmp) {
         tmp.write("tokenizer.json", in);
         auto t = tok::loadTokenizer(tmp.path());
         if (!t) return ignore(t.takeError());
         auto ids = (*t)->encode("Hello, world! 123 caf\xc3\xa9 \xe4\xb8\xad <|endoftext|>");
         if (!ids) return ignore(ids.takeError());
         ignore((*t)->decode(*ids));
       }},
  };
  return t;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || !targets().count(argv[1])) {
    llvm::errs() << "usage: minfer_fuzz TARGET [--iterations N] [--seed S] [--dump K] SEED_FILE...\ntargets:";
    for (const auto &[name, fn] : targets()) llvm::errs() << " " << name;
    llvm::errs() << "\n";
    return 2;
  }
  std::string name = argv[1];
  uint64_t iterations = 1000, seed = 1;
  int64_t dump = -1;
  std::vector<std::string> seeds;
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--iterations" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, iterations);
    else if (a == "--seed" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, seed);
    else if (a == "--dump" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, dump);
    else {
      auto buf = llvm::MemoryBuffer::getFile(a);
      if (!buf) {
        llvm::errs() << "minfer_fuzz: cannot read seed " << a << "\n";
        return 2;
      }
      seeds.push_back((*buf)->getBuffer().str());
    }
  }
  if (seeds.empty()) {
    llvm::errs() << "minfer_fuzz: no seed files\n";
    return 2;
  }
  const FuzzTarget &fuzz = targets().at(name);
  test::TempDir tmp("minfer-fuzz");
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    Rng rng{seed * 0x100000001B3ull + i};
    std::string input = i < seeds.size() ? seeds[i] : mutate(seeds, rng); // the seeds themselves first
    if (dump >= 0) {
      if (i == uint64_t(dump)) {
        llvm::outs() << input;
        return 0;
      }
      continue;
    }
    fuzz(input, tmp);
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  llvm::outs() << "minfer_fuzz " << name << ": " << iterations << " inputs from " << seeds.size() << " seeds in "
               << llvm::format("%.1f", s) << " s, no crash\n";
  return 0;
}
