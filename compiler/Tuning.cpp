// compiler/Tuning.cpp — buckets, fingerprints, the tuning database file and the search (Tuning.h).
#include "compiler/Tuning.h"
#include "compiler/kernels/KernelSpec.h"
#include "ir/Json.h"

#include "ir/Diagnostics.h"
#include "jit/AtomicFile.h"
#include "jit/Target.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace minfer {
namespace {

// The format of the file; a different one is read as foreign.
constexpr int64_t kFormat = 1;

} // namespace

std::string tuningBucket(bool decode, int64_t rows) {
  if (decode) {
    if (rows <= 1) return "decode:1";
    if (rows <= 8) return "decode:2-8";
    if (rows <= 16) return "decode:9-16"; // the last gemv rows (Gemv.h kGemvMaxRows); gemm above
    if (rows <= 64) return "decode:17-64";
    return "decode:65+";
  }
  if (rows <= 512) return "prefill:1-512";
  if (rows <= 2048) return "prefill:513-2048";
  return "prefill:2049+";
}

int64_t bucketRows(llvm::StringRef b) {
  static const std::map<std::string, int64_t> rows = {
      {"decode:1", 1},         {"decode:2-8", 8},          {"decode:9-16", 16},    {"decode:17-64", 64},
      {"decode:65+", 128},
      {"prefill:1-512", 512}, {"prefill:513-2048", 2048}, {"prefill:2049+", 4096}};
  auto it = rows.find(b.str());
  return it == rows.end() ? 0 : it->second;
}

const std::vector<std::string> &allTuningBuckets() {
  static const std::vector<std::string> all = {"decode:1",      "decode:2-8",       "decode:9-16",  "decode:17-64",
                                               "decode:65+",    "prefill:1-512",    "prefill:513-2048",
                                               "prefill:2049+"};
  return all;
}

bool isTuningBucket(llvm::StringRef name) { return bucketRows(name) > 0; }

std::string DeviceFingerprint::target() const { return deviceTargetName(ccMajor, ccMinor); }

std::string DeviceFingerprint::id() const {
  std::string n;
  for (char c : name) n += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c)) : '-';
  return llvm::formatv("{0}_sm{1}{2}_{3}sm_drv{4}_nvrtc{5}", n, ccMajor, ccMinor, smCount, driverVersion, nvrtcVersion)
      .str();
}

llvm::json::Object DeviceFingerprint::toJSON() const {
  return llvm::json::Object{{"name", name},
                            {"sm_count", smCount},
                            {"compute_capability", std::to_string(ccMajor) + "." + std::to_string(ccMinor)},
                            {"driver_version", driverVersion},
                            {"nvrtc_version", nvrtcVersion}};
}

std::optional<DeviceFingerprint> DeviceFingerprint::fromJSON(const llvm::json::Object &o) {
  DeviceFingerprint d;
  auto name = o.getString("name");
  auto sms = o.getInteger("sm_count");
  auto cc = o.getString("compute_capability");
  auto drv = o.getInteger("driver_version");
  auto nvrtc = o.getString("nvrtc_version");
  if (!name || !sms || !cc || !drv || !nvrtc) return std::nullopt;
  auto [major, minor] = cc->split('.');
  if (major.getAsInteger(10, d.ccMajor) || minor.getAsInteger(10, d.ccMinor)) return std::nullopt;
  d.name = name->str();
  d.smCount = static_cast<int>(*sms);
  d.driverVersion = static_cast<int>(*drv);
  d.nvrtcVersion = nvrtc->str();
  return d;
}

bool DeviceFingerprint::operator==(const DeviceFingerprint &o) const {
  return name == o.name && smCount == o.smCount && ccMajor == o.ccMajor && ccMinor == o.ccMinor &&
         driverVersion == o.driverVersion && nvrtcVersion == o.nvrtcVersion;
}

const TuningEntry *TuningDb::find(llvm::StringRef tuningKey, llvm::StringRef bucket) const {
  auto it = entries.find(entryKey(tuningKey, bucket));
  return it == entries.end() ? nullptr : &it->second;
}

std::string TuningDb::directory(llvm::StringRef cacheDir) {
  llvm::SmallString<256> p(cacheDir);
  llvm::sys::path::append(p, "tuning");
  return std::string(p);
}

std::string TuningDb::pathFor(llvm::StringRef cacheDir, const DeviceFingerprint &d) {
  llvm::SmallString<256> p(directory(cacheDir));
  llvm::sys::path::append(p, d.id() + ".json");
  return std::string(p);
}

llvm::json::Object TuningDb::toJSON() const {
  llvm::json::Object es;
  for (const auto &[key, e] : entries) {
    llvm::json::Object o{{"tile", e.tile}, {"us", e.us}, {"candidates", e.candidates}, {"failed", e.failed}};
    if (!e.defaultTile.empty()) {
      o["default_tile"] = e.defaultTile;
      o["default_us"] = e.defaultUs;
    }
    if (!e.runnersUp.empty()) {
      llvm::json::Array ru;
      for (const TuningEntry::Timed &t : e.runnersUp) ru.push_back(llvm::json::Object{{"tile", t.tile}, {"us", t.us}});
      o["runners_up"] = std::move(ru);
    }
    if (!e.failedTiles.empty()) {
      llvm::json::Array ft;
      for (const std::string &t : e.failedTiles) ft.push_back(t);
      o["failed_tiles"] = std::move(ft);
    }
    if (e.stepMs > 0) o["step_ms"] = e.stepMs;
    if (!e.kernelTile.empty()) o["kernel_tile"] = e.kernelTile;
    es[key] = std::move(o);
  }
  return llvm::json::Object{{"format", kFormat}, {"device", device.toJSON()}, {"entries", std::move(es)}};
}

llvm::Expected<TuningDb> TuningDb::read(llvm::StringRef path) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buf) return ir::makeError(path + ": " + buf.getError().message());
  auto json = ir::parseJson((*buf)->getBuffer());
  if (!json) return ir::makeError(path + ": not JSON: " + llvm::toString(json.takeError()));
  const llvm::json::Object *o = json->getAsObject();
  if (!o) return ir::makeError(path + ": expected a JSON object");
  if (o->getInteger("format") != kFormat)
    return ir::makeError(path + ": tuning database format " + llvm::Twine(o->getInteger("format").getValueOr(-1)) +
                         ", expected " + llvm::Twine(kFormat));
  const llvm::json::Object *dev = o->getObject("device");
  std::optional<DeviceFingerprint> fp = dev ? DeviceFingerprint::fromJSON(*dev) : std::nullopt;
  if (!fp) return ir::makeError(path + ": the device fingerprint is missing or incomplete");
  const llvm::json::Object *es = o->getObject("entries");
  if (!es) return ir::makeError(path + ": no \"entries\" object");
  TuningDb db;
  db.device = *fp;
  for (const auto &[key, v] : *es) {
    const llvm::json::Object *e = v.getAsObject();
    auto tile = e ? e->getString("tile") : llvm::None;
    auto us = e ? e->getNumber("us") : llvm::None;
    if (!tile || !us || key.str().find('@') == std::string::npos)
      return ir::makeError(path + ": entry '" + key.str() + "' needs a key `spec@bucket`, a \"tile\" and \"us\"");
    TuningEntry t;
    t.tile = tile->str();
    t.us = *us;
    t.candidates = static_cast<int>(e->getInteger("candidates").getValueOr(0));
    t.failed = static_cast<int>(e->getInteger("failed").getValueOr(0));
    t.defaultTile = e->getString("default_tile").getValueOr("").str();
    t.defaultUs = e->getNumber("default_us").getValueOr(0);
    t.stepMs = e->getNumber("step_ms").getValueOr(0);
    t.kernelTile = e->getString("kernel_tile").getValueOr("").str();
    if (const llvm::json::Array *ru = e->getArray("runners_up"))
      for (const llvm::json::Value &v : *ru) {
        const llvm::json::Object *r = v.getAsObject();
        auto rt = r ? r->getString("tile") : llvm::None;
        auto rus = r ? r->getNumber("us") : llvm::None;
        if (!rt || !rus)
          return ir::makeError(path + ": entry '" + key.str() + "': each of \"runners_up\" needs a \"tile\" and \"us\"");
        t.runnersUp.push_back({rt->str(), *rus});
      }
    if (const llvm::json::Array *ft = e->getArray("failed_tiles"))
      for (const llvm::json::Value &v : *ft) {
        auto tile = v.getAsString();
        if (!tile)
          return ir::makeError(path + ": entry '" + key.str() + "': \"failed_tiles\" holds tile names (strings)");
        t.failedTiles.push_back(tile->str());
      }
    db.entries[key.str()] = std::move(t);
  }
  return db;
}

TuningDb TuningDb::load(llvm::StringRef path, const DeviceFingerprint &device, std::string *warning) {
  TuningDb empty;
  empty.device = device;
  if (!llvm::sys::fs::exists(path)) return empty;
  auto db = read(path);
  if (!db) {
    if (warning) *warning = "ignoring the tuning database " + llvm::toString(db.takeError()) + "; using default tiles";
    else llvm::consumeError(db.takeError());
    return empty;
  }
  if (!(db->device == device)) {
    if (warning)
      *warning = "ignoring the tuning database " + path.str() + ": it was written for " + db->device.id() +
                 ", this is " + device.id() + "; using default tiles";
    return empty;
  }
  return std::move(*db);
}

std::optional<std::string> TuningDb::newestFor(llvm::StringRef cacheDir, llvm::StringRef target) {
  // The same SM: a 9.0 device's database serves sm_90 and sm_90a builds (tiles a target cannot run fall
  // back to the default when the plan reads them).
  auto wanted = parseTarget(target);
  if (!wanted) {
    llvm::consumeError(wanted.takeError());
    return std::nullopt;
  }
  std::optional<std::string> best;
  llvm::sys::TimePoint<> bestTime;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(directory(cacheDir), ec), end; it != end && !ec; it.increment(ec)) {
    if (!llvm::StringRef(it->path()).endswith(".json")) continue;
    auto db = read(it->path());
    if (!db) {
      llvm::consumeError(db.takeError());
      continue;
    }
    llvm::sys::fs::file_status st;
    if (db->device.ccMajor * 10 + db->device.ccMinor != wanted->smVersion() || llvm::sys::fs::status(it->path(), st))
      continue;
    if (!best || st.getLastModificationTime() > bestTime) best = it->path(), bestTime = st.getLastModificationTime();
  }
  return best;
}

llvm::Error TuningDb::save(llvm::StringRef path) const {
  if (auto ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return ir::makeError("cannot create " + llvm::sys::path::parent_path(path) + ": " + ec.message());
  return writeAtomically(path, [&](llvm::raw_ostream &os) {
    os << llvm::formatv("{0:2}", llvm::json::Value(toJSON())) << "\n";
    return llvm::Error::success();
  });
}

SearchResult searchFastest(size_t candidates, const std::function<llvm::Expected<double>(size_t)> &time,
                           double noise) {
  SearchResult r;
  r.us.assign(candidates, -1.0);
  double fastest = 0;
  for (size_t i = 0; i < candidates; ++i) {
    auto t = time(i);
    if (!t) {
      r.failures.push_back(llvm::toString(t.takeError()));
      continue;
    }
    if (!(*t > 0)) { // a zero or NaN time is a broken measurement, not a fast kernel
      r.failures.push_back("candidate " + std::to_string(i) + ": non-positive time");
      continue;
    }
    r.us[i] = *t;
    if (r.best < 0 || *t < fastest) fastest = *t, r.best = static_cast<int>(i);
  }
  // Within noise of the fastest, the first listed wins.
  for (size_t i = 0; i < candidates && r.best >= 0; ++i)
    if (r.us[i] > 0 && r.us[i] <= fastest * (1 + noise)) {
      r.best = static_cast<int>(i);
      break;
    }
  return r;
}

std::vector<std::string> missingStepNeighbours(const TuningEntry &e, const KernelSpec &spec, const Target &target) {
  std::vector<std::shared_ptr<KernelSpec>> neighbours = spec.stepNeighbours(target);
  const std::string &won = e.kernelTile.empty() ? e.tile : e.kernelTile;
  if (won != spec.tileName())
    if (std::shared_ptr<KernelSpec> winner = spec.withTile(won, target))
      for (auto &n : winner->stepNeighbours(target)) neighbours.push_back(std::move(n));
  std::vector<std::string> missing;
  for (const auto &n : neighbours) {
    const std::string tile = n->tileName();
    bool listed = tile == e.tile || tile == e.defaultTile || tile == e.kernelTile ||
                  llvm::is_contained(e.failedTiles, tile) || llvm::is_contained(missing, tile);
    for (const TuningEntry::Timed &r : e.runnersUp) listed = listed || r.tile == tile;
    if (!listed) missing.push_back(tile);
  }
  return missing;
}

llvm::Expected<StepSearchResult> searchInStep(const std::vector<int> &options,
                                              const std::function<llvm::Expected<double>(const std::vector<int> &)> &stepMs,
                                              double noise, const std::vector<int> &start) {
  if (!start.empty() && start.size() != options.size())
    return ir::makeError(
        llvm::formatv("in-step tuning: a start of {0} choices for {1} kernels", start.size(), options.size()).str());
  StepSearchResult r;
  r.choice.assign(options.size(), 0);
  std::map<std::vector<int>, double> timings;
  auto time = [&](const std::vector<int> &choice) -> llvm::Expected<double> {
    if (auto it = timings.find(choice); it != timings.end()) return it->second;
    auto t = stepMs(choice);
    if (!t) return t.takeError();
    ++r.timed;
    if (!(*t > 0)) return ir::makeError(llvm::formatv("in-step tuning: a step timed {0} ms, not a positive time", *t).str());
    timings[choice] = *t;
    return *t;
  };
  auto first = time(r.choice);
  if (!first) return first.takeError();
  r.firstMs = r.bestMs = *first;
  if (!start.empty() && start != r.choice) {
    auto s = time(start);
    if (!s) return s.takeError();
    r.startMs = *s;
    if (*s < r.bestMs * (1 - noise)) r.choice = start, r.bestMs = *s;
  }
  for (;;) {
    std::vector<int> pick;
    double pickMs = 0;
    for (size_t i = 0; i < options.size(); ++i)
      for (int o = 0; o < options[i]; ++o) {
        if (o == r.choice[i]) continue;
        std::vector<int> trial = r.choice;
        trial[i] = o;
        auto t = time(trial);
        if (!t) return t.takeError();
        if (pick.empty() || *t < pickMs) pick = std::move(trial), pickMs = *t;
      }
    if (pick.empty() || !(pickMs < r.bestMs * (1 - noise))) break;
    r.choice = std::move(pick);
    r.bestMs = pickMs;
  }
  return r;
}

} // namespace minfer
