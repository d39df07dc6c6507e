// tests/common/RandomBf16.h — random bf16 bits, N(0, stddev), for the kernel tests and the benchmarks
// (bench/ includes it too): logits and activations that are finite and never all equal, so data-dependent
// kernels such as argmax and sampling do their real work.
#pragma once

#include "io/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace minfer::test {

// `n` values drawn from N(0, stddev) by `rng`, rounded to bf16.
inline std::vector<uint16_t> randomBf16Bits(size_t n, std::mt19937 &rng, float stddev = 1.f) {
  std::normal_distribution<float> d(0.f, stddev);
  std::vector<uint16_t> bits(n);
  for (uint16_t &b : bits) b = floatToBf16(d(rng));
  return bits;
}

// The same from a generator seeded `seed`: the same bits in every call.
inline std::vector<uint16_t> randomBf16Bits(size_t n, unsigned seed, float stddev = 1.f) {
  std::mt19937 rng(seed);
  return randomBf16Bits(n, rng, stddev);
}

} // namespace minfer::test
