// Safetensors.cpp — validating safetensors reader, sharded-checkpoint index, half-float conversions
// and a small atomic writer. See Safetensors.h for the format; this file checks every number the file
// supplies before anything indexes with it, so a damaged or hostile checkpoint yields an error, not a
// crash.
#include "io/Safetensors.h"
#include "ir/Json.h"

#include "io/Files.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <tuple>

namespace minfer {
namespace {

namespace json = llvm::json;
namespace endian = llvm::support::endian;
using llvm::StringRef;

// The reference implementation refuses headers above 100 MB (100,000,000 bytes); so do we, so that a
// corrupt length cannot make us parse (or allocate for) gigabytes of "JSON".
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// A valid header nests 3 levels (root object, entry object, shape array). LLVM's JSON parser recurses
// once per level, so deeper input is refused before parsing to keep a hostile header off the stack.
constexpr int kMaxJsonDepth = 32;
constexpr const char *kIndexName = "model.safetensors.index.json";
constexpr const char *kSingleName = "model.safetensors";

// The one table of dtypes: header spelling and element size.
struct DTypeRow {
  StDType dtype;
  const char *name;
  size_t size;
};
constexpr DTypeRow kDTypes[] = {
    {StDType::BOOL, "BOOL", 1}, {StDType::U8, "U8", 1},           {StDType::I8, "I8", 1},
    {StDType::I16, "I16", 2},   {StDType::U16, "U16", 2},         {StDType::F16, "F16", 2},
    {StDType::BF16, "BF16", 2}, {StDType::I32, "I32", 4},         {StDType::U32, "U32", 4},
    {StDType::F32, "F32", 4},   {StDType::F64, "F64", 8},         {StDType::I64, "I64", 8},
    {StDType::U64, "U64", 8},   {StDType::F8_E4M3, "F8_E4M3", 1}, {StDType::F8_E5M2, "F8_E5M2", 1},
};

const DTypeRow &row(StDType dtype) {
  for (const DTypeRow &r : kDTypes)
    if (r.dtype == dtype) return r;
  return kDTypes[0]; // unreachable: every enumerator has a row
}


/// A JSON value for an error message, cut short so a huge value cannot flood the message.
std::string describe(const json::Value &v) {
  std::string s;
  llvm::raw_string_ostream(s) << v;
  return s.size() > 48 ? s.substr(0, 45) + "..." : s;
}

std::string shapeString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// numel × element size in bytes, or nullopt if a dim is negative or the product overflows 64 bits.
std::optional<uint64_t> byteSize(llvm::ArrayRef<int64_t> shape, StDType dtype) {
  uint64_t n = stDTypeSize(dtype);
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
  return n;
}

// What LLVM 14's JSON parser hides: it keeps the last of duplicate keys without a word, turns integral
// floats (2.0, 1e3) into integers and clamps integers beyond int64 to INT64_MAX. This scan over the raw
// text recovers those facts; it also enforces kMaxJsonDepth. On malformed text it simply stops early
// and leaves the diagnosis to json::parse.
struct JsonScan {
  std::vector<std::string> duplicatePath; // enclosing object keys, then the repeated key; empty if none
  // (top-level key, key within it) -> first number literal under it that is not a plain int64 integer.
  std::map<std::pair<std::string, std::string>, std::string> nonIntegers;
};

std::string decodeKey(StringRef quoted) {
  if (!quoted.contains('\\')) return quoted.drop_front().drop_back().str();
  llvm::Expected<json::Value> v = json::parse(quoted);
  if (!v) {
    llvm::consumeError(v.takeError());
    return quoted.str();
  }
  return v->getAsString() ? v->getAsString()->str() : quoted.str();
}

llvm::Expected<JsonScan> scanJson(StringRef path, StringRef text, StringRef what) {
  struct Frame {
    bool object;
    bool expectKey;
    std::string key; // the key whose value is being read (objects only)
    llvm::StringSet<> keys;
  };
  JsonScan out;
  std::vector<Frame> stack;
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '{' || c == '[') {
      if (stack.size() >= size_t(kMaxJsonDepth))
        return fileError(path, "{0} JSON nests deeper than {1} levels", what, kMaxJsonDepth);
      stack.push_back(Frame{c == '{', c == '{', "", {}});
      ++i;
    } else if (c == '}' || c == ']') {
      if (stack.empty()) break;
      stack.pop_back();
      ++i;
    } else if (c == ',') {
      if (!stack.empty() && stack.back().object) stack.back().expectKey = true;
      ++i;
    } else if (c == '"') {
      size_t start = i++;
      while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (i >= text.size()) break;
      ++i;
      if (stack.empty() || !stack.back().object || !stack.back().expectKey) continue; // a string value
      Frame &f = stack.back();
      f.key = decodeKey(text.slice(start, i));
      f.expectKey = false;
      if (!f.keys.insert(f.key).second && out.duplicatePath.empty()) {
        for (const Frame &g : stack)
          if (g.object) out.duplicatePath.push_back(g.key);
      }
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      size_t start = i;
      while (i < text.size() && StringRef("0123456789+-.eE").contains(text[i])) ++i;
      StringRef literal = text.slice(start, i);
      int64_t value;
      bool plain = !literal.getAsInteger(10, value);
      if (!plain && stack.size() >= 2 && stack[0].object && stack[1].object)
        out.nonIntegers.emplace(std::make_pair(stack[0].key, stack[1].key), literal.str());
    } else {
      ++i; // whitespace, ':', true/false/null
    }
  }
  return out;
}

/// Parses `text`, which must be a JSON object; `what` names it in errors.
llvm::Expected<json::Value> parseObject(StringRef path, StringRef text, StringRef what) {
  llvm::Expected<json::Value> v = ir::parseJson(text);
  if (!v) return fileError(path, "{0} is not valid JSON: {1}", what, llvm::toString(v.takeError()));
  if (!v->getAsObject()) return fileError(path, "{0} must be a JSON object, found {1}", what, describe(*v));
  return v;
}

std::vector<std::string> sortedKeys(const json::Object &o) {
  std::vector<std::string> keys;
  for (const auto &kv : o) keys.push_back(kv.first.str());
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// Reads a JSON array of non-negative integers (a shape or data_offsets) of tensor `name`.
llvm::Error readIntArray(StringRef path, StringRef name, StringRef field, const json::Value *v, const JsonScan &scan,
                         std::vector<int64_t> &out) {
  if (!v) return fileError(path, "tensor '{0}': missing key '{1}'", name, field);
  const json::Array *a = v->getAsArray();
  if (!a)
    return fileError(path, "tensor '{0}': '{1}' must be an array of non-negative integers, found {2}", name, field,
                describe(*v));
  auto bad = scan.nonIntegers.find({name.str(), field.str()});
  if (bad != scan.nonIntegers.end())
    return fileError(path, "tensor '{0}': '{1}' must hold non-negative integers (within int64), found '{2}'", name, field,
                bad->second);
  for (const json::Value &e : *a) {
    std::optional<int64_t> i;
    if (auto x = e.getAsInteger()) i = *x;
    if (!i || *i < 0)
      return fileError(path, "tensor '{0}': '{1}' must hold non-negative integers, found {2}", name, field, describe(e));
    out.push_back(*i);
  }
  return llvm::Error::success();
}

llvm::Expected<TensorInfo> readEntry(StringRef path, StringRef name, const json::Value &v, const JsonScan &scan) {
  const json::Object *entry = v.getAsObject();
  if (!entry) return fileError(path, "tensor '{0}': entry must be a JSON object, found {1}", name, describe(v));
  for (const std::string &key : sortedKeys(*entry))
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      return fileError(path, "tensor '{0}': unknown key '{1}' (expected dtype, shape, data_offsets)", name, key);

  TensorInfo t;
  t.name = name.str();
  const json::Value *dtype = entry->get("dtype");
  if (!dtype) return fileError(path, "tensor '{0}': missing key 'dtype'", name);
  llvm::Optional<StringRef> dtypeName = dtype->getAsString();
  if (!dtypeName) return fileError(path, "tensor '{0}': 'dtype' must be a string, found {1}", name, describe(*dtype));
  std::optional<StDType> parsed = parseStDType(*dtypeName);
  if (!parsed) {
    std::string known;
    for (const DTypeRow &r : kDTypes) known += (known.empty() ? "" : ", ") + std::string(r.name);
    return fileError(path, "tensor '{0}': unknown dtype '{1}' (known: {2})", name, *dtypeName, known);
  }
  t.dtype = *parsed;

  if (llvm::Error e = readIntArray(path, name, "shape", entry->get("shape"), scan, t.shape)) return e;
  std::vector<int64_t> offsets;
  if (llvm::Error e = readIntArray(path, name, "data_offsets", entry->get("data_offsets"), scan, offsets)) return e;
  if (offsets.size() != 2)
    return fileError(path, "tensor '{0}': 'data_offsets' must hold exactly 2 integers [begin, end], found {1}", name,
                offsets.size());
  if (offsets[0] > offsets[1])
    return fileError(path, "tensor '{0}': data_offsets [{1}, {2}] end before they begin", name, offsets[0], offsets[1]);
  t.begin = uint64_t(offsets[0]);
  t.end = uint64_t(offsets[1]);

  std::optional<uint64_t> bytes = byteSize(t.shape, t.dtype);
  if (!bytes)
    return fileError(path, "tensor '{0}': shape {1} of {2} is too large (byte count overflows 64 bits)", name,
                shapeString(t.shape), stDTypeName(t.dtype));
  if (*bytes != t.end - t.begin)
    return fileError(path, "tensor '{0}': shape {1} of {2} needs {3} bytes but data_offsets [{4}, {5}] span {6}", name,
                shapeString(t.shape), stDTypeName(t.dtype), *bytes, t.begin, t.end, t.end - t.begin);
  return t;
}

/// Validates the whole header and checks that the tensors tile the data section exactly.
llvm::Error parseHeader(StringRef path, StringRef text, uint64_t dataSize, std::vector<TensorInfo> &tensors,
                        std::map<std::string, std::string> &metadata) {
  llvm::Expected<JsonScan> scan = scanJson(path, text, "header");
  if (!scan) return scan.takeError();
  llvm::Expected<json::Value> root = parseObject(path, text, "header");
  if (!root) return root.takeError();
  const std::vector<std::string> &dup = scan->duplicatePath;
  if (dup.size() == 1) return fileError(path, "duplicate tensor name '{0}' in header", dup[0]);
  if (dup.size() == 2 && dup[0] == "__metadata__") return fileError(path, "duplicate metadata key '{0}'", dup[1]);
  if (dup.size() == 2) return fileError(path, "tensor '{0}': duplicate key '{1}'", dup[0], dup[1]);
  if (!dup.empty()) return fileError(path, "duplicate key '{0}' in header", dup.back());

  const json::Object &obj = *root->getAsObject();
  for (const std::string &name : sortedKeys(obj)) {
    const json::Value &v = *obj.get(name);
    if (name == "__metadata__") {
      const json::Object *m = v.getAsObject();
      if (!m) return fileError(path, "'__metadata__' must be an object of strings, found {0}", describe(v));
      for (const std::string &key : sortedKeys(*m)) {
        llvm::Optional<StringRef> s = m->get(key)->getAsString();
        if (!s) return fileError(path, "metadata key '{0}' must map to a string, found {1}", key, describe(*m->get(key)));
        metadata[key] = s->str();
      }
      continue;
    }
    llvm::Expected<TensorInfo> t = readEntry(path, name, v, *scan);
    if (!t) return t.takeError();
    tensors.push_back(std::move(*t));
  }

  // Offset order; zero-size tensors sort before a tensor starting at the same byte, ties by name.
  std::sort(tensors.begin(), tensors.end(), [](const TensorInfo &a, const TensorInfo &b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  uint64_t at = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo &t = tensors[i];
    if (i == 0 && t.begin != 0)
      return fileError(path, "gap of {0} bytes at the start of the data section: first tensor '{1}' begins at {0}",
                  t.begin, t.name);
    if (i > 0 && t.begin > at)
      return fileError(path, "gap of {0} bytes between tensor '{1}' (ends at {2}) and tensor '{3}' (begins at {4})",
                  t.begin - at, tensors[i - 1].name, at, t.name, t.begin);
    if (i > 0 && t.begin < at)
      return fileError(path, "tensor '{0}' [{1}, {2}) overlaps tensor '{3}' [{4}, {5})", tensors[i - 1].name,
                  tensors[i - 1].begin, at, t.name, t.begin, t.end);
    at = t.end;
  }
  if (at > dataSize)
    return fileError(path,
                "file is truncated: tensor '{0}' ends at byte {1} of the data section, which has only "
                "{2} bytes",
                tensors.back().name, at, dataSize);
  if (at < dataSize)
    return fileError(path,
                "{0} trailing bytes after the last tensor{1}: tensors end at byte {2} of a {3}-byte "
                "data section",
                dataSize - at, tensors.empty() ? "" : " '" + tensors.back().name + "'", at, dataSize);
  return llvm::Error::success();
}


} // namespace

llvm::StringRef stDTypeName(StDType dtype) { return row(dtype).name; }
size_t stDTypeSize(StDType dtype) { return row(dtype).size; }
std::optional<StDType> parseStDType(llvm::StringRef name) {
  for (const DTypeRow &r : kDTypes)
    if (name == r.name) return r.dtype;
  return std::nullopt;
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---- scalar conversions ----------------------------------------------------------------------------

float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1Fu, man = bits & 0x3FFu;
  if (exp == 0x1F) // inf / NaN, payload kept
    return std::bit_cast<float>(sign | 0x7F800000u | man << 13);
  if (exp == 0) { // zero / subnormal: man × 2^-24
    float m = std::ldexp(float(man), -24);
    return sign ? -m : m;
  }
  return std::bit_cast<float>(sign | (exp + 127 - 15) << 23 | man << 13);
}

uint16_t floatToF16(float value) {
  uint32_t u = std::bit_cast<uint32_t>(value);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) // NaN: quiet bit set, top payload bits kept
    return uint16_t(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x47800000u) // |value| >= 2^16 or inf: beyond rounding range
    return uint16_t(sign | 0x7C00u);
  int e = int(a >> 23) - 127;
  uint32_t m = a & 0x7FFFFFu;
  if (e >= -14) { // normal half; a carry out of the mantissa correctly bumps the exponent (up to inf)
    uint32_t h = uint32_t(e + 15) << 10 | m >> 13, rem = m & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  if (e < -25) // below 2^-25, half the smallest subnormal: rounds to zero
    return sign;
  // Subnormal half: count units of 2^-24. The value is (m | 2^23) × 2^(e-23), so shift by -(e+1).
  uint32_t full = m | 0x800000u;
  int shift = -e - 1; // 14..24
  uint32_t h = full >> shift, rem = full & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

// ---- SafetensorsFile ---------------------------------------------------------------------------------

llvm::Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return fileError(path, "cannot open safetensors file: {0}", buffer.getError().message());
  StringRef all = (*buffer)->getBuffer();
  if (all.size() < 8) return fileError(path, "file is {0} bytes, shorter than the 8-byte header length", all.size());
  uint64_t headerLen = endian::read64le(all.data());
  if (headerLen > kMaxHeaderBytes)
    return fileError(path, "header length {0} exceeds the limit of {1} bytes (100 MB)", headerLen, kMaxHeaderBytes);
  if (headerLen > all.size() - 8)
    return fileError(path, "header length {0} runs past the end of the file ({1} bytes follow the length)", headerLen,
                all.size() - 8);

  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->Path = path.str();
  StringRef header = all.substr(8, headerLen);
  uint64_t dataSize = all.size() - 8 - headerLen;
  if (llvm::Error e = parseHeader(path, header, dataSize, f->Tensors, f->Metadata)) return e;
  f->Data = llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(all.data()) + 8 + headerLen, dataSize);
  for (size_t i = 0; i < f->Tensors.size(); ++i) f->ByName[f->Tensors[i].name] = i;
  f->Buffer = std::move(*buffer);
  return f;
}

const TensorInfo *SafetensorsFile::find(llvm::StringRef name) const {
  auto it = ByName.find(name);
  return it == ByName.end() ? nullptr : &Tensors[it->second];
}

llvm::ArrayRef<uint8_t> SafetensorsFile::bytes(const TensorInfo &info) const {
  const TensorInfo *own = find(info.name);
  if (!own || own->begin != info.begin || own->end != info.end) return {};
  return Data.slice(own->begin, own->end - own->begin);
}

// ---- Checkpoint --------------------------------------------------------------------------------------

std::optional<Checkpoint::Ref> Checkpoint::find(llvm::StringRef name) const {
  auto it = ByName.find(name);
  if (it == ByName.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  for (const auto &kv : ByName) out.push_back(kv.getKey().str());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<const SafetensorsFile *> Checkpoint::files() const {
  std::vector<const SafetensorsFile *> out;
  for (const auto &f : Files) out.push_back(f.get());
  return out;
}

llvm::Expected<Checkpoint> Checkpoint::open(llvm::StringRef path) {
  Checkpoint cp;
  cp.Path = path.str();
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return fileError(path, "cannot open checkpoint: {0}", ec.message());

  llvm::SmallString<256> indexPath, singlePath;
  if (llvm::sys::fs::is_directory(status)) {
    indexPath = path;
    llvm::sys::path::append(indexPath, kIndexName);
    singlePath = path;
    llvm::sys::path::append(singlePath, kSingleName);
    if (!llvm::sys::fs::exists(indexPath)) {
      indexPath.clear();
      if (!llvm::sys::fs::exists(singlePath))
        return fileError(path, "checkpoint directory holds neither {0} nor {1}", kIndexName, kSingleName);
    }
  } else if (path.endswith(".json")) {
    indexPath = path;
  } else {
    singlePath = path;
  }

  if (indexPath.empty()) { // a single file
    auto file = SafetensorsFile::open(singlePath);
    if (!file) return file.takeError();
    for (const TensorInfo &t : (*file)->tensors()) cp.ByName[t.name] = Ref{file->get(), &t};
    cp.Files.push_back(std::move(*file));
    return cp;
  }

  // Sharded: {"metadata": {...}, "weight_map": {tensor: shard file name}}.
  auto buffer = llvm::MemoryBuffer::getFile(indexPath, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return fileError(indexPath, "cannot open checkpoint index: {0}", buffer.getError().message());
  StringRef text = (*buffer)->getBuffer();
  llvm::Expected<JsonScan> scan = scanJson(indexPath, text, "checkpoint index");
  if (!scan) return scan.takeError();
  llvm::Expected<json::Value> root = parseObject(indexPath, text, "checkpoint index");
  if (!root) return root.takeError();
  const std::vector<std::string> &dup = scan->duplicatePath;
  if (dup.size() == 2 && dup[0] == "weight_map")
    return fileError(indexPath, "duplicate tensor '{0}' in weight_map", dup[1]);
  if (!dup.empty()) return fileError(indexPath, "duplicate key '{0}' in checkpoint index", dup.back());
  const json::Object &obj = *root->getAsObject();
  for (const std::string &key : sortedKeys(obj))
    if (key != "metadata" && key != "weight_map")
      return fileError(indexPath, "unknown key '{0}' in checkpoint index (expected metadata, weight_map)", key);
  if (const json::Value *m = obj.get("metadata"); m && !m->getAsObject())
    return fileError(indexPath, "'metadata' must be an object, found {0}", describe(*m));
  const json::Value *wm = obj.get("weight_map");
  if (!wm) return fileError(indexPath, "missing key 'weight_map'");
  const json::Object *weightMap = wm->getAsObject();
  if (!weightMap)
    return fileError(indexPath, "'weight_map' must be an object of tensor name -> shard file, found {0}", describe(*wm));
  if (weightMap->empty()) return fileError(indexPath, "'weight_map' is empty");

  llvm::SmallString<256> dir = llvm::sys::path::parent_path(indexPath);
  llvm::StringMap<const SafetensorsFile *> shards;
  for (const std::string &name : sortedKeys(*weightMap)) {
    const json::Value &v = *weightMap->get(name);
    llvm::Optional<StringRef> shard = v.getAsString();
    if (!shard)
      return fileError(indexPath, "tensor '{0}': shard must be a file name string, found {1}", name, describe(v));
    if (shard->empty() || shard->contains('/') || shard->contains('\\') || *shard == "." || *shard == "..")
      return fileError(indexPath, "tensor '{0}': shard '{1}' is not a plain file name in the index's directory", name,
                  *shard);
    auto it = shards.find(*shard);
    if (it == shards.end()) {
      llvm::SmallString<256> shardPath = dir;
      llvm::sys::path::append(shardPath, *shard);
      auto file = SafetensorsFile::open(shardPath);
      if (!file)
        return fileError(indexPath, "shard '{0}' (holding tensor '{1}'): {2}", *shard, name,
                    llvm::toString(file.takeError()));
      it = shards.try_emplace(*shard, file->get()).first;
      cp.Files.push_back(std::move(*file));
    }
    const TensorInfo *info = it->second->find(name);
    if (!info)
      return fileError(indexPath, "tensor '{0}' is mapped to shard '{1}', which does not contain it", name, *shard);
    cp.ByName[name] = Ref{it->second, info};
  }
  return cp;
}

// ---- typed reads -------------------------------------------------------------------------------------

llvm::Expected<std::vector<float>> readAsFloat32(const SafetensorsFile &file, const TensorInfo &info) {
  if (info.dtype != StDType::BF16 && info.dtype != StDType::F16 && info.dtype != StDType::F32)
    return fileError(file.path(), "tensor '{0}' has dtype {1}; readAsFloat32 supports BF16, F16 and F32", info.name,
                stDTypeName(info.dtype));
  llvm::ArrayRef<uint8_t> raw = file.bytes(info);
  size_t n = size_t(info.numel()), size = stDTypeSize(info.dtype);
  if (raw.size() != n * size) return fileError(file.path(), "tensor '{0}' is not one of this file's tensors", info.name);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t *p = raw.data() + i * size;
    if (info.dtype == StDType::F32)
      out[i] = std::bit_cast<float>(endian::read32le(p));
    else if (info.dtype == StDType::BF16)
      out[i] = bf16ToFloat(endian::read16le(p));
    else
      out[i] = f16ToFloat(endian::read16le(p));
  }
  return out;
}

llvm::Expected<std::vector<int64_t>> readAsInt64(const SafetensorsFile &file, const TensorInfo &info) {
  if (info.dtype != StDType::I32 && info.dtype != StDType::I64)
    return fileError(file.path(), "tensor '{0}' has dtype {1}; readAsInt64 supports I32 and I64", info.name,
                stDTypeName(info.dtype));
  llvm::ArrayRef<uint8_t> raw = file.bytes(info);
  size_t n = size_t(info.numel()), size = stDTypeSize(info.dtype);
  if (raw.size() != n * size) return fileError(file.path(), "tensor '{0}' is not one of this file's tensors", info.name);
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t *p = raw.data() + i * size;
    out[i] = size == 4 ? int64_t(int32_t(endian::read32le(p))) : int64_t(endian::read64le(p));
  }
  return out;
}

// ---- writer ------------------------------------------------------------------------------------------

llvm::Error writeSafetensors(llvm::raw_ostream &os, llvm::StringRef path, llvm::ArrayRef<OwnedTensor> tensors,
                             const std::map<std::string, std::string> &metadata) {
  json::Object header;
  llvm::StringSet<> seen;
  uint64_t offset = 0;
  for (const OwnedTensor &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !json::isUTF8(t.name))
      return fileError(path,
                  "cannot write tensor named '{0}': names must be non-empty UTF-8 other than "
                  "'__metadata__'",
                  t.name);
    if (!seen.insert(t.name).second) return fileError(path, "cannot write: duplicate tensor name '{0}'", t.name);
    std::optional<uint64_t> bytes = byteSize(t.shape, t.dtype);
    if (!bytes)
      return fileError(path, "cannot write tensor '{0}': shape {1} has a negative dim or is too large", t.name,
                  shapeString(t.shape));
    if (*bytes != t.data.size())
      return fileError(path, "cannot write tensor '{0}': shape {1} of {2} needs {3} bytes but data holds {4}", t.name,
                  shapeString(t.shape), stDTypeName(t.dtype), *bytes, t.data.size());
    json::Array shape;
    for (int64_t d : t.shape) shape.push_back(d);
    header[t.name] = json::Object{{"dtype", stDTypeName(t.dtype)},
                                  {"shape", std::move(shape)},
                                  {"data_offsets", json::Array{int64_t(offset), int64_t(offset + *bytes)}}};
    offset += *bytes;
  }
  if (!metadata.empty()) {
    json::Object m;
    for (const auto &[key, value] : metadata) {
      if (!json::isUTF8(key) || !json::isUTF8(value))
        return fileError(path, "cannot write metadata key '{0}': keys and values must be UTF-8", key);
      m[key] = value;
    }
    header["__metadata__"] = std::move(m);
  }
  std::string text;
  llvm::raw_string_ostream(text) << json::Value(std::move(header));
  text.append((8 - text.size() % 8) % 8, ' '); // pad so the data section starts 8-byte aligned

  char len[8];
  endian::write64le(len, text.size());
  os.write(len, 8);
  os << text;
  for (const OwnedTensor &t : tensors) os.write(reinterpret_cast<const char *>(t.data.data()), t.data.size());
  return llvm::Error::success();
}

} // namespace minfer
