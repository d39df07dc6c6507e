// io/Nfc.cpp — NFC as UAX #15 defines it: full canonical decomposition (Hangul syllables algorithmically),
// canonical ordering of combining marks, then canonical composition of each mark with the last starter it
// is not blocked from.
#include "io/Nfc.h"

#include "io/Tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace minfer::tok {
namespace {

struct CombiningRange {
  uint32_t first, last;
  uint8_t ccc;
};
struct Decomposition {
  uint32_t cp, first, second; // second 0: a singleton
};
struct Composition {
  uint32_t first, second, composite;
};
#include "io/UnicodeNfc.inc"

// Hangul syllables: S = SBase + (L index * VCount + V index) * TCount + T index.
constexpr uint32_t SBase = 0xAC00, LBase = 0x1100, VBase = 0x1161, TBase = 0x11A7;
constexpr uint32_t LCount = 19, VCount = 21, TCount = 28, SCount = LCount * VCount * TCount;

uint8_t combiningClass(uint32_t cp) {
  auto it = std::upper_bound(std::begin(kCombiningClass), std::end(kCombiningClass), cp,
                             [](uint32_t c, const CombiningRange &r) { return c < r.first; });
  if (it == std::begin(kCombiningClass)) return 0;
  --it;
  return cp <= it->last ? it->ccc : 0;
}

void decompose(uint32_t cp, std::vector<uint32_t> &out) {
  if (cp >= SBase && cp < SBase + SCount) {
    uint32_t s = cp - SBase;
    out.push_back(LBase + s / (VCount * TCount));
    out.push_back(VBase + (s % (VCount * TCount)) / TCount);
    if (s % TCount) out.push_back(TBase + s % TCount);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecomposition), std::end(kDecomposition), cp,
                             [](const Decomposition &d, uint32_t c) { return d.cp < c; });
  if (it == std::end(kDecomposition) || it->cp != cp) {
    out.push_back(cp);
    return;
  }
  decompose(it->first, out);
  if (it->second) decompose(it->second, out);
}

// The primary composite of a + b; 0 when there is none.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= LBase && a < LBase + LCount && b >= VBase && b < VBase + VCount)
    return SBase + ((a - LBase) * VCount + (b - VBase)) * TCount;
  if (a >= SBase && a < SBase + SCount && (a - SBase) % TCount == 0 && b > TBase && b < TBase + TCount)
    return a + (b - TBase);
  auto it = std::lower_bound(std::begin(kComposition), std::end(kComposition), std::pair(a, b),
                             [](const Composition &c, std::pair<uint32_t, uint32_t> k) {
                               return std::pair(c.first, c.second) < k;
                             });
  return it != std::end(kComposition) && it->first == a && it->second == b ? it->composite : 0;
}

void appendUtf8(uint32_t cp, std::string &out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

} // namespace

std::string nfc(llvm::StringRef text) {
  std::vector<uint32_t> cps;
  bool quick = true; // below U+0300 every character is already in NFC and never composes with its neighbour
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    size_t n = utf8::decodeOne(text, i, cp);
    if (n == 0) return text.str(); // not UTF-8: callers have checked
    quick &= cp < 0x300;
    cps.push_back(cp);
    i += n;
  }
  if (quick) return text.str();

  std::vector<uint32_t> d;
  d.reserve(cps.size());
  for (uint32_t cp : cps) decompose(cp, d);
  // Canonical ordering: each run of non-starters sorted by combining class, stably.
  for (size_t i = 0; i < d.size();) {
    if (combiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && combiningClass(d[j]) != 0) ++j;
    std::stable_sort(d.begin() + i, d.begin() + j,
                     [](uint32_t a, uint32_t b) { return combiningClass(a) < combiningClass(b); });
    i = j;
  }
  // Composition: a character joins the last starter unless a character between them is a starter or has a
  // combining class at least its own (it is "blocked").
  std::vector<uint32_t> out;
  out.reserve(d.size());
  int starter = -1;
  uint8_t lastClass = 0;
  for (uint32_t cp : d) {
    uint8_t cc = combiningClass(cp);
    if (starter >= 0) {
      bool adjacent = out.size() == size_t(starter) + 1;
      if (adjacent || (lastClass != 0 && lastClass < cc)) {
        if (uint32_t c = compose(out[size_t(starter)], cp)) {
          out[size_t(starter)] = c;
          continue;
        }
      }
    }
    if (cc == 0) starter = int(out.size());
    out.push_back(cp);
    lastClass = cc;
  }
  std::string s;
  s.reserve(text.size());
  for (uint32_t cp : out) appendUtf8(cp, s);
  return s;
}

} // namespace minfer::tok
