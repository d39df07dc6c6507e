// tests/fuzz/FuzzMain.cpp — a deterministic mutation fuzzer for every reader of untrusted input (the build
// has no libFuzzer: g++). Each target takes bytes and must answer with a value or an llvm::Error: a
// crash, a sanitizer report (the sanitizer build, CI's second leg) or a hang is a finding.
//
//   minfer_fuzz TARGET [--iterations N] [--seed S] [--dump K] [--stats] SEED_FILE...
//
// Iteration i mutates one seed (chosen, like every mutation, by a splitmix64 stream of S and i) with 1 to 8
// edits: bit flips, random bytes, inserted or deleted runs, repeated runs, interesting tokens (huge and
// negative numbers, brackets, quotes), deep nesting, and splices from another seed. Runs are reproducible:
// `--dump K` writes input K to stdout instead of running, to turn a finding into a regression test;
// `--stats` prints the 12 most frequent errors the inputs ended with.
//
// Targets: ir (parse, verify, fuse, plan for sm_90a), config (config.json -> IR), safetensors (open and
// read every tensor's header), npy, tuning (a tuning database), tokenizer (a tokenizer.json: load, encode,
// decode), bundle (a .mfb: read, then load it as the Engine does, plan and take its kernels), cache (one
// kernel-cache entry: list and verify the cache holding it).
//
// Bundles and cache entries are sealed by checksums, so almost every mutation would stop at "checksum
// mismatch". Those targets also re-seal the mutated bytes (as an attacker who can write the file would)
// and run the reader again on that, so the parsers behind the seal see the mutations too.
#include "common/TestFiles.h"

#include "compiler/Fuse.h"
#include "compiler/Pipeline.h"
#include "compiler/Plan.h"
#include "compiler/Tuning.h"
#include "io/HFImport.h"
#include "io/Npy.h"
#include "io/Safetensors.h"
#include "io/Tokenizer.h"
#include "ir/Json.h"
#include "ir/Parser.h"
#include "ir/Verifier.h"
#include "jit/Bundle.h"
#include "jit/Hash.h"
#include "jit/KernelCache.h"
#include "jit/Target.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
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

// Where in an input most edits should land (a bundle's manifest rather than its half-megabyte of cubins):
// [begin, end), or the whole input.
using Focus = std::function<std::pair<size_t, size_t>(const std::string &)>;

std::string mutate(const std::vector<std::string> &seeds, Rng &rng, const Focus &focus) {
  std::string s = seeds[rng.below(seeds.size())];
  auto [focusBegin, focusEnd] = focus ? focus(s) : std::pair<size_t, size_t>{0, s.size()};
  int edits = 1 + int(rng.below(8));
  for (int e = 0; e < edits; ++e) {
    size_t at = rng.below(s.size() + 1);
    if (focusEnd > focusBegin && focusEnd <= s.size() && rng.below(4) != 0) at = focusBegin + rng.below(focusEnd - focusBegin);
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

// With --stats: how often each error message (its first 60 bytes, digits dropped) ended an input, to see
// how deep the mutations get.
std::map<std::string, uint64_t> *errorStats = nullptr;

void count(std::string m) {
  if (!errorStats) return;
  if (size_t tmp = m.find("minfer-fuzz"); tmp != std::string::npos) // the temporary directory's path
    if (size_t slash = m.find('/', tmp); slash != std::string::npos) m.erase(0, slash + 1);
  llvm::erase_if(m, [](char c) { return c >= '0' && c <= '9'; });
  ++(*errorStats)[m.substr(0, 90)];
}

void ignore(llvm::Error e) {
  if (!errorStats || !e) return llvm::consumeError(std::move(e));
  count(llvm::toString(std::move(e)));
}
template <typename T> void ignore(llvm::Expected<T> v) {
  if (!v) ignore(v.takeError());
}

// Little-endian unsigned of `width` bytes at `at`, or nullopt past the end.
std::optional<uint64_t> readLE(const std::string &s, size_t at, unsigned width) {
  if (at > s.size() || s.size() - at < width) return std::nullopt;
  uint64_t v = 0;
  for (unsigned i = 0; i < width; ++i) v |= uint64_t(uint8_t(s[at + i])) << (8 * i);
  return v;
}

// Writes SHA-256 of s[0, end) over the 32 bytes at `end`, when they exist.
void seal(std::string &s, uint64_t end) {
  if (end > s.size() || s.size() - end < 32) return;
  auto digest = sha256(llvm::StringRef(s.data(), end));
  s.replace(end, 32, reinterpret_cast<const char *>(digest.data()), 32);
}

// A bundle (jit/Bundle.h): 24-byte header with the manifest length at byte 16, then the manifest, then the seal.
std::string resealBundle(std::string s) {
  if (auto len = readLE(s, 16, 8); len && *len <= s.size()) seal(s, 24 + *len);
  return s;
}

// A cache entry (jit/KernelCache.cpp): magic (8), version (4), key (32), four u32-length strings, the cubin
// and the PTX (u64 lengths), then SHA-256 of everything before it.
std::string resealEntry(std::string s) {
  size_t pos = 8 + 4 + 32;
  for (int i = 0; i < 4; ++i) {
    auto n = readLE(s, pos, 4);
    if (!n) return s;
    pos += 4 + *n;
  }
  for (int i = 0; i < 2; ++i) {
    auto n = readLE(s, pos, 8);
    if (!n || *n > s.size()) return s;
    pos += 8 + *n;
  }
  seal(s, pos);
  return s;
}

// Three edits in four land in a bundle's manifest.
std::pair<size_t, size_t> bundleManifest(const std::string &s) {
  auto len = readLE(s, 16, 8);
  return len && *len <= s.size() - 24 ? std::pair<size_t, size_t>{24, 24 + *len} : std::pair<size_t, size_t>{0, 0};
}

// Loads a bundle as the Engine does, short of the GPU: read and verify, passes, plan for its target, its
// kernels.
void loadBundle(const std::string &path) {
  auto p = Pipeline::load(path);
  if (!p) return ignore(p.takeError());
  if (auto e = p->runPasses()) return ignore(std::move(e));
  auto target = parseTarget(p->bundle()->target);
  if (!target) return ignore(target.takeError());
  auto plan = p->plan(*target);
  if (!plan) return ignore(plan.takeError());
  ignore(p->compile(*target));
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
      {"bundle",
       [](const std::string &in, test::TempDir &tmp) {
         ignore(readBundle(tmp.write("raw.mfb", in)));
         loadBundle(tmp.write("resealed.mfb", resealBundle(in)));
       }},
      {"cache",
       [](const std::string &in, test::TempDir &tmp) {
         // The entry under its own key's name (bytes 12..44), so the key check passes where the bytes allow.
         std::string sealed = resealEntry(in);
         std::string key = sealed.size() >= 44 ? llvm::toHex(llvm::StringRef(sealed.data() + 12, 32), true) : "0";
         std::string dir = tmp.file("cache");
         llvm::sys::fs::remove_directories(dir);
         llvm::sys::fs::create_directories(dir + "/kernels");
         test::writeFile(dir + "/kernels/" + key + ".mkc", sealed);
         test::writeFile(dir + "/kernels/raw.mkc", in);
         KernelCache cache = KernelCache::openAt(dir);
         if (auto entries = cache.list())
           for (const CacheEntryInfo &info : *entries) count(info.valid ? "valid" : info.problem);
         else
           ignore(entries.takeError());
         ignore(cache.verify(/*removeBad=*/true));
         ignore(cache.clear());
       }},
  };
  return t;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 3 || !targets().count(argv[1])) {
    llvm::errs() << "usage: minfer_fuzz TARGET [--iterations N] [--seed S] [--dump K] [--stats] SEED_FILE...\ntargets:";
    for (const auto &[name, fn] : targets()) llvm::errs() << " " << name;
    llvm::errs() << "\n";
    return 2;
  }
  std::string name = argv[1];
  uint64_t iterations = 1000, seed = 1;
  int64_t dump = -1;
  std::map<std::string, uint64_t> stats;
  std::vector<std::string> seeds;
  for (int i = 2; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--iterations" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, iterations);
    else if (a == "--seed" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, seed);
    else if (a == "--dump" && i + 1 < argc) llvm::StringRef(argv[++i]).getAsInteger(10, dump);
    else if (a == "--stats") errorStats = &stats;
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
  const Focus focus = name == "bundle" ? Focus(bundleManifest) : Focus();
  test::TempDir tmp("minfer-fuzz");
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < iterations; ++i) {
    Rng rng{seed * 0x100000001B3ull + i};
    std::string input = i < seeds.size() ? seeds[i] : mutate(seeds, rng, focus); // the seeds themselves first
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
               << llvm::format("%.1f", s) << " s, no crash\n";  std::vector<std::pair<uint64_t, std::string>> top;
  for (const auto &[m, n] : stats) top.push_back({n, m});
  std::sort(top.rbegin(), top.rend());
  for (size_t i = 0; i < top.size() && i < 12; ++i) llvm::outs() << llvm::format("%8llu  ", top[i].first) << top[i].second << "\n";
  return 0;
}
