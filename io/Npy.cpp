// Npy.cpp — writer and validating reader for float32 .npy files (see Npy.h).
//
// Layout (NumPy's format spec): 6-byte magic "\x93NUMPY", major and minor version bytes, header length
// (u16 LE in version 1.0, u32 LE in 2.0 / 3.0), then an ASCII Python dict literal such as
// "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" padded with spaces and ended by '\n',
// then the raw data. The reader parses only that dict grammar and checks every length against the file.
#include "io/Npy.h"

#include "io/Files.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SwapByteOrder.h"
#include "llvm/Support/raw_ostream.h"

#include <bit>
#include <optional>
#include <set>
#include <string>

namespace minfer {
namespace {

namespace endian = llvm::support::endian;
using llvm::StringRef;

constexpr StringRef kMagic("\x93NUMPY", 6);
// NumPy (since 1.16) pads the header so the data starts on a 64-byte boundary, which lets a reader map
// the array aligned for any SIMD width; we write the same layout.
constexpr size_t kDataAlign = 64;
constexpr size_t kPreamble1 = 10; // magic 6 + version 2 + u16 header length


/// Python tuple spelling of a shape: "()", "(5,)", "(2, 3)".
std::string shapeTuple(llvm::ArrayRef<int64_t> shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// Element count of `shape`, or nullopt if a dim is negative or the byte count (×4) overflows.
std::optional<uint64_t> elementCount(llvm::ArrayRef<int64_t> shape) {
  uint64_t n = 1, bytes = 0;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, uint64_t(d), &n)) return std::nullopt;
  if (__builtin_mul_overflow(n, uint64_t(sizeof(float)), &bytes)) return std::nullopt;
  return n;
}

struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

/// A cursor over the header dict text, for the small subset of Python literal syntax NumPy writes.
class DictCursor {
public:
  explicit DictCursor(StringRef text) : Text(text) {}
  void skipSpace() {
    while (Pos < Text.size() && StringRef(" \t\r\n").contains(Text[Pos])) ++Pos;
  }
  bool atEnd() {
    skipSpace();
    return Pos == Text.size();
  }
  bool eat(char c) {
    skipSpace();
    if (Pos < Text.size() && Text[Pos] == c) {
      ++Pos;
      return true;
    }
    return false;
  }
  /// A '...' or "..." string without escapes.
  std::optional<std::string> quoted() {
    skipSpace();
    if (Pos >= Text.size() || (Text[Pos] != '\'' && Text[Pos] != '"')) return std::nullopt;
    size_t close = Text.find(Text[Pos], Pos + 1);
    if (close == StringRef::npos || Text.slice(Pos + 1, close).contains('\\')) return std::nullopt;
    std::string s = Text.slice(Pos + 1, close).str();
    Pos = close + 1;
    return s;
  }
  /// True or False.
  std::optional<bool> boolean() {
    skipSpace();
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}})
      if (Text.substr(Pos).startswith(word)) {
        Pos += StringRef(word).size();
        return value;
      }
    return std::nullopt;
  }
  /// A tuple of non-negative integers: "()", "(5,)", "(2, 3)" or "(2, 3,)". "(5)" is not a tuple.
  std::optional<std::vector<int64_t>> shapeTuple() {
    std::vector<int64_t> dims;
    if (!eat('(')) return std::nullopt;
    if (eat(')')) return dims;
    while (true) {
      skipSpace();
      size_t start = Pos;
      while (Pos < Text.size() && Text[Pos] >= '0' && Text[Pos] <= '9') ++Pos;
      int64_t d;
      if (Text.slice(start, Pos).getAsInteger(10, d)) return std::nullopt; // empty, or beyond int64
      if (Pos < Text.size() && Text[Pos] == 'L') ++Pos; // Python 2 long suffix, written by old NumPy
      dims.push_back(d);
      if (eat(')')) return dims.size() == 1 ? std::nullopt : std::optional(dims);
      if (!eat(',')) return std::nullopt;
      if (eat(')')) return dims;
    }
  }
  size_t pos() const { return Pos; }

private:
  StringRef Text;
  size_t Pos = 0;
};

llvm::Expected<Header> parseHeaderDict(StringRef path, StringRef text) {
  DictCursor c(text);
  Header h;
  std::set<std::string> seen;
  if (!c.eat('{'))
    return fileError(path, "header must be a Python dict literal starting with '{{', found '{0}'", text.take_front(20));
  while (!c.eat('}')) { // each pass reads one  key: value  pair
    std::optional<std::string> key = c.quoted();
    if (!key) return fileError(path, "expected a quoted key in the header dict at byte {0}", c.pos());
    if (!seen.insert(*key).second) return fileError(path, "duplicate key '{0}' in the header dict", *key);
    if (!c.eat(':')) return fileError(path, "expected ':' after key '{0}' in the header dict", *key);
    if (*key == "descr") {
      std::optional<std::string> v = c.quoted();
      if (!v) return fileError(path, "'descr' must be a quoted dtype string such as '<f4'");
      h.descr = *v;
    } else if (*key == "fortran_order") {
      std::optional<bool> v = c.boolean();
      if (!v) return fileError(path, "'fortran_order' must be True or False");
      h.fortranOrder = *v;
    } else if (*key == "shape") {
      std::optional<std::vector<int64_t>> v = c.shapeTuple();
      if (!v) return fileError(path, "'shape' must be a tuple of non-negative integers such as (2, 3), (5,) or ()");
      h.shape = std::move(*v);
    } else {
      return fileError(path, "unknown key '{0}' in the header dict (expected descr, fortran_order, shape)", *key);
    }
    if (c.eat(',')) continue;
    if (c.eat('}')) break;
    return fileError(path, "expected ',' or '}' after the value of '{0}' in the header dict", *key);
  }
  if (!c.atEnd()) return fileError(path, "unexpected text after the header dict at byte {0}", c.pos());
  for (const char *key : {"descr", "fortran_order", "shape"})
    if (!seen.count(key)) return fileError(path, "the header dict has no '{0}' key", key);
  return h;
}

} // namespace

llvm::Error writeNpyF32(llvm::raw_ostream &os, llvm::StringRef path, llvm::ArrayRef<int64_t> shape,
                        llvm::ArrayRef<float> data) {
  std::optional<uint64_t> n = elementCount(shape);
  if (!n) return fileError(path, "cannot write shape {0}: a dim is negative or the size overflows", shapeTuple(shape));
  if (*n != data.size())
    return fileError(path, "cannot write: shape {0} holds {1} elements but {2} floats were given", shapeTuple(shape),
                     *n, data.size());
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shapeTuple(shape) + ", }";
  header.append((kDataAlign - (kPreamble1 + header.size() + 1) % kDataAlign) % kDataAlign, ' ');
  header += '\n';
  if (header.size() > UINT16_MAX)
    return fileError(path, "cannot write: shape of rank {0} makes the header too long for NPY 1.0", shape.size());

  char preamble[kPreamble1];
  std::copy(kMagic.begin(), kMagic.end(), preamble);
  preamble[6] = 1; // version 1.0
  preamble[7] = 0;
  endian::write16le(preamble + 8, uint16_t(header.size()));
  os.write(preamble, sizeof preamble);
  os << header;
  if (llvm::sys::IsLittleEndianHost) {
    os.write(reinterpret_cast<const char *>(data.data()), data.size() * sizeof(float));
  } else {
    for (float f : data) {
      char le[4];
      endian::write32le(le, std::bit_cast<uint32_t>(f));
      os.write(le, 4);
    }
  }
  return llvm::Error::success();
}

llvm::Expected<NpyArray> readNpyF32(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer) return fileError(path, "cannot open .npy file: {0}", buffer.getError().message());
  StringRef all = (*buffer)->getBuffer();
  if (!all.startswith(kMagic)) return fileError(path, "not an NPY file: it does not start with the magic \"\\x93NUMPY\"");
  if (all.size() < kPreamble1)
    return fileError(path, "file is {0} bytes, too short for the {1}-byte NPY preamble", all.size(), kPreamble1);
  unsigned major = uint8_t(all[6]), minor = uint8_t(all[7]);
  if (major < 1 || major > 3 || minor != 0)
    return fileError(path, "unsupported NPY format version {0}.{1} (supported: 1.0, 2.0, 3.0)", major, minor);
  size_t preamble = major == 1 ? kPreamble1 : kPreamble1 + 2; // 2.0 and 3.0 use a u32 header length
  if (all.size() < preamble)
    return fileError(path, "file is {0} bytes, too short for the {1}-byte NPY {2}.0 preamble", all.size(), preamble,
                major);
  uint64_t headerLen = major == 1 ? endian::read16le(all.data() + 8) : endian::read32le(all.data() + 8);
  if (headerLen > all.size() - preamble)
    return fileError(path, "header length {0} runs past the end of the file ({1} bytes follow the preamble)", headerLen,
                all.size() - preamble);

  llvm::Expected<Header> h = parseHeaderDict(path, all.substr(preamble, headerLen));
  if (!h) return h.takeError();
  if (h->descr != "<f4")
    return fileError(path, "dtype '{0}' is not supported; only '<f4' (little-endian float32) is", h->descr);
  if (h->fortranOrder)
    return fileError(path, "Fortran-order arrays (fortran_order: True) are not supported; only C order");
  std::optional<uint64_t> n = elementCount(h->shape);
  if (!n) return fileError(path, "shape {0} is too large (byte count overflows 64 bits)", shapeTuple(h->shape));

  uint64_t have = all.size() - preamble - headerLen, need = *n * sizeof(float);
  if (have < need)
    return fileError(path,
                "file is truncated: shape {0} of float32 needs {1} data bytes but only {2} follow the "
                "header",
                shapeTuple(h->shape), need, have);
  if (have > need)
    return fileError(path, "{0} trailing bytes after the {1} data bytes of shape {2}", have - need, need,
                shapeTuple(h->shape));
  NpyArray out;
  out.shape = std::move(h->shape);
  out.data.resize(*n);
  const char *p = all.data() + preamble + headerLen;
  for (uint64_t i = 0; i < *n; ++i) out.data[i] = std::bit_cast<float>(endian::read32le(p + 4 * i));
  return out;
}

} // namespace minfer
