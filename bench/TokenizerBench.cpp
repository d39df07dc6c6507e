// bench/TokenizerBench.cpp — encoding speed of the checkpoint tokenizers (io/Tokenizer.h), one thread, for
// bench/hf_tokenizer_bench.py to compare with Hugging Face `tokenizers` on the same text in the same run.
//
//   minfer_tokenizer_bench --text FILE --out results.json DIR...
//
// For each tokenizer directory: the text (a few MB of mixed-language text) encoded whole and line by line,
// best of 5; prints and writes MB/s and tokens, and the ids' checksum so both sides can be seen to produce
// the same ids.
#include "io/Tokenizer.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

using namespace minfer;

int main(int argc, char **argv) {
  std::string textPath, outPath;
  std::vector<std::string> dirs;
  for (int i = 1; i < argc; ++i) {
    llvm::StringRef a = argv[i];
    if (a == "--text" && i + 1 < argc) textPath = argv[++i];
    else if (a == "--out" && i + 1 < argc) outPath = argv[++i];
    else dirs.push_back(a.str());
  }
  if (textPath.empty() || dirs.empty()) {
    llvm::errs() << "usage: minfer_tokenizer_bench --text FILE [--out results.json] DIR...\n";
    return 1;
  }
  auto buf = llvm::MemoryBuffer::getFile(textPath);
  if (!buf) {
    llvm::errs() << "minfer_tokenizer_bench: cannot read " << textPath << "\n";
    return 1;
  }
  llvm::StringRef text = (*buf)->getBuffer();
  llvm::json::Array results;
  for (const std::string &dir : dirs) {
    auto tok = tok::loadTokenizer(dir);
    if (!tok) {
      llvm::errs() << "minfer_tokenizer_bench: " << llvm::toString(tok.takeError()) << "\n";
      return 1;
    }
    // Two ways an application encodes: the whole text in one call, and line by line (many short calls).
    llvm::SmallVector<llvm::StringRef> lines;
    text.split(lines, '\n');
    for (llvm::StringRef mode : {"whole", "lines"}) {
      double best = 1e30;
      std::vector<int32_t> ids;
      for (int rep = 0; rep < 5; ++rep) {
        ids.clear();
        auto t0 = std::chrono::steady_clock::now();
        llvm::ArrayRef<llvm::StringRef> parts = mode == "whole" ? llvm::ArrayRef<llvm::StringRef>(text) : lines;
        for (llvm::StringRef part : parts) {
          auto r = (*tok)->encode(part);
          if (!r) {
            llvm::errs() << "minfer_tokenizer_bench: " << llvm::toString(r.takeError()) << "\n";
            return 1;
          }
          ids.insert(ids.end(), r->begin(), r->end());
        }
        auto t1 = std::chrono::steady_clock::now();
        best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
      }
      uint64_t sum = 0;
      for (int32_t id : ids) sum = sum * 1000003u + uint64_t(id);
      double mbs = double(text.size()) / 1e6 / best;
      llvm::outs() << llvm::formatv("{0} ({1}): {2} bytes -> {3} tokens in {4:f1} ms ({5:f2} MB/s), checksum {6}\n",
                                    llvm::sys::path::filename(dir), mode, text.size(), ids.size(), best * 1e3, mbs, sum);
      results.push_back(llvm::json::Object{{"tokenizer", llvm::sys::path::filename(dir)},
                                           {"impl", "minfer"},
                                           {"mode", mode},
                                           {"bytes", int64_t(text.size())},
                                           {"tokens", int64_t(ids.size())},
                                           {"seconds", best},
                                           {"mb_per_s", mbs},
                                           {"checksum", std::to_string(sum)}});
    }
  }
  if (!outPath.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(outPath, ec);
    if (ec) {
      llvm::errs() << "minfer_tokenizer_bench: cannot write " << outPath << ": " << ec.message() << "\n";
      return 1;
    }
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(results))) << "\n";
  }
  return 0;
}
