// compiler/minferc.cpp — the minfer command-line driver.
//
//   minferc model.ir [--emit=ir] [-o out.ir]        parse, verify, print
//   minferc import-hf DIR -o model.ir               HF checkpoint directory → IR
//   minferc run MODEL --prompt-ids 1,2,3 ...        greedy generation through the reference interpreter
//
// Library code returns errors; only this file prints them and picks the exit code: 0 on success, 1 on a
// user error, with one message and no half-written output file.
#include "compiler/HFImport.h"
#include "compiler/Npy.h"
#include "compiler/Safetensors.h"
#include "compiler/WeightLoader.h"
#include "ir/Diagnostics.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace minfer;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("minferc options");

cl::SubCommand importCmd("import-hf", "Write the IR of a Hugging Face checkpoint directory (config.json, *.safetensors)");
cl::SubCommand runCmd("run", "Generate tokens greedily from a model (an .ir file or an HF checkpoint directory)");

// ----- top level: minferc model.ir
cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.ir>"), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
enum class Emit { IR };
cl::opt<Emit> emit("emit", cl::desc("What to print"), cl::values(clEnumValN(Emit::IR, "ir", "the verified module as IR text")),
                   cl::init(Emit::IR), cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<bool> splitInput("split-input-file",
                         cl::desc("Treat each `// -----`-separated chunk of the input as its own module"),
                         cl::sub(*cl::TopLevelSubCommand), cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file (default: standard output)"), cl::value_desc("file"),
                                cl::init("-"), cl::sub(*cl::TopLevelSubCommand), cl::sub(importCmd), cl::cat(category));

// ----- import-hf DIR
cl::opt<std::string> importDir(cl::Positional, cl::desc("<checkpoint dir>"), cl::Required, cl::sub(importCmd), cl::cat(category));

// ----- run MODEL
cl::opt<std::string> runModel(cl::Positional, cl::desc("<model.ir | checkpoint dir>"), cl::Required, cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> weightsPath("weights", cl::desc("Weights: a .safetensors file, an index.json, or a directory (default: MODEL when it is a directory)"),
                                 cl::value_desc("path"), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> promptIds("prompt-ids", cl::desc("Prompt token ids, comma-separated"), cl::value_desc("1,2,3"),
                               cl::Required, cl::sub(runCmd), cl::cat(category));
cl::opt<int64_t> maxNewTokens("max-new-tokens", cl::desc("Number of tokens to generate"), cl::init(16), cl::sub(runCmd), cl::cat(category));
enum class Backend { Reference };
cl::opt<Backend> backend("backend", cl::desc("Where to run"),
                         cl::values(clEnumValN(Backend::Reference, "reference", "the fp32 CPU reference interpreter")),
                         cl::init(Backend::Reference), cl::sub(runCmd), cl::cat(category));
cl::opt<std::string> logitsOut("logits-out",
                               cl::desc("Write float32 [rows, vocab] logits as .npy: one row per prompt position, then "
                                        "one per generated token fed back"),
                               cl::value_desc("file.npy"), cl::sub(runCmd), cl::cat(category));

int fail(llvm::Error e) {
  llvm::errs() << ir::renderError(std::move(e));
  return 1;
}

llvm::Error userError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

// Writes `text` to `path` (stdout for "-") through a temporary file and a rename.
llvm::Error writeOutput(llvm::StringRef path, llvm::StringRef text) {
  if (path == "-") {
    llvm::outs() << text;
    return llvm::Error::success();
  }
  if (auto e = llvm::writeFileAtomically(path.str() + ".tmp%%%%%%", path, text))
    return userError("cannot write '" + path + "': " + llvm::toString(std::move(e)));
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<ir::Module>> loadVerified(std::unique_ptr<llvm::MemoryBuffer> buf) {
  auto m = ir::parseModule(std::move(buf));
  if (!m) return m.takeError();
  if (auto e = ir::verifyModule(**m)) return e;
  return m;
}

int compileMain() {
  if (inputPath.empty()) return fail(userError("no input file; see minferc --help"));
  auto buf = llvm::MemoryBuffer::getFileOrSTDIN(inputPath, /*IsText=*/true);
  if (!buf) return fail(userError("cannot read '" + inputPath + "': " + buf.getError().message()));
  if (!splitInput) {
    auto m = loadVerified(std::move(*buf));
    if (!m) return fail(m.takeError());
    if (auto e = writeOutput(outputPath, ir::printModule(**m))) return fail(std::move(e));
    return 0;
  }
  // Each chunk keeps its line numbers: it is parsed with as many newlines in front as lines came before.
  llvm::StringRef rest = (*buf)->getBuffer();
  std::string out;
  bool anyFailed = false;
  size_t linesBefore = 0;
  while (true) {
    size_t sep = std::string::npos, search = 0;
    while ((search = rest.find("// -----", search)) != llvm::StringRef::npos) {
      if (search == 0 || rest[search - 1] == '\n') {
        sep = search;
        break;
      }
      search += 1;
    }
    llvm::StringRef chunk = rest.substr(0, sep);
    auto m = loadVerified(llvm::MemoryBuffer::getMemBufferCopy(std::string(linesBefore, '\n') + chunk.str(),
                                                               (*buf)->getBufferIdentifier()));
    if (m) {
      out += (out.empty() ? "" : "// -----\n") + ir::printModule(**m);
    } else {
      llvm::errs() << ir::renderError(m.takeError());
      anyFailed = true;
    }
    if (sep == std::string::npos) break;
    linesBefore += chunk.count('\n');
    rest = rest.substr(sep);
    size_t eol = rest.find('\n');
    linesBefore += eol == llvm::StringRef::npos ? 0 : 1;
    rest = eol == llvm::StringRef::npos ? llvm::StringRef() : rest.substr(eol + 1);
  }
  if (auto e = writeOutput(outputPath, out)) return fail(std::move(e));
  return anyFailed ? 1 : 0;
}

int importMain() {
  auto m = importHF(importDir);
  if (!m) return fail(m.takeError());
  if (auto e = writeOutput(outputPath, ir::printModule(**m))) return fail(std::move(e));
  return 0;
}

llvm::Expected<std::vector<int32_t>> parseIds(llvm::StringRef text, int64_t vocab) {
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  std::vector<int32_t> ids;
  for (llvm::StringRef p : parts) {
    int64_t v = 0;
    if (p.trim().getAsInteger(10, v))
      return userError("--prompt-ids: '" + p.trim() + "' is not an integer; expected ids like 1,2,3");
    if (v < 0 || v >= vocab)
      return userError("--prompt-ids: token id " + std::to_string(v) + " is outside the vocabulary [0, " +
                       std::to_string(vocab) + ")");
    ids.push_back(static_cast<int32_t>(v));
  }
  if (ids.empty() || text.trim().empty()) return userError("--prompt-ids: expected at least one token id");
  return ids;
}

int runMain() {
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  bool isDir = llvm::sys::fs::is_directory(runModel);
  std::unique_ptr<ir::Module> module;
  if (isDir) {
    auto m = importHF(runModel);
    if (!m) return fail(m.takeError());
    module = std::move(*m);
  } else {
    if (!llvm::sys::fs::exists(runModel)) return fail(userError("model '" + runModel + "' does not exist"));
    auto buf = llvm::MemoryBuffer::getFile(runModel, /*IsText=*/true);
    if (!buf) return fail(userError("cannot read '" + runModel + "': " + buf.getError().message()));
    auto m = loadVerified(std::move(*buf));
    if (!m) return fail(m.takeError());
    module = std::move(*m);
  }
  std::string wpath = weightsPath.empty() ? (isDir ? runModel.getValue() : std::string()) : weightsPath.getValue();
  if (wpath.empty()) return fail(userError("model '" + runModel + "' is an IR file; give its weights with --weights PATH"));
  if (maxNewTokens < 0) return fail(userError("--max-new-tokens must not be negative"));

  int64_t vocab = *module->value(module->outputs[0]).type.lastDim();
  auto ids = parseIds(promptIds, vocab);
  if (!ids) return fail(ids.takeError());
  auto ckpt = Checkpoint::open(wpath);
  if (!ckpt) return fail(ckpt.takeError());
  auto weights = loadWeightsF32(*module, *ckpt);
  if (!weights) return fail(weights.takeError());
  auto t1 = Clock::now();

  int64_t maxSeq = static_cast<int64_t>(ids->size()) + std::max<int64_t>(maxNewTokens, 1);
  auto interp = ir::Interpreter::create(*module, *weights, /*batch=*/1, maxSeq);
  if (!interp) return fail(interp.takeError());
  auto result = ir::generateGreedy(**interp, {*ids}, maxNewTokens);
  if (!result) return fail(result.takeError());
  auto t2 = Clock::now();

  if (!logitsOut.empty()) {
    const ir::Tensor &l = result->logits[0];
    if (auto e = writeNpyF32(logitsOut, l.shape, l.data)) return fail(std::move(e));
  }
  llvm::outs() << llvm::join(llvm::map_range(result->tokens[0], [](int32_t t) { return std::to_string(t); }), ",")
               << "\n";
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  llvm::errs() << llvm::format("minferc run: backend=reference load %.0f ms, %zu prompt + %zu generated tokens in %.0f ms\n",
                               ms(t1 - t0), ids->size(), result->tokens[0].size(), ms(t2 - t1));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) { os << "minferc (minfer) 0.1.0\n"; });
  if (!cl::ParseCommandLineOptions(argc, argv,
                                   "minfer: a JIT kernel-generation compiler for decoder-only LLMs\n\n"
                                   "  minferc model.ir [--emit=ir] [-o FILE]\n"
                                   "  minferc import-hf DIR -o model.ir\n"
                                   "  minferc run MODEL --prompt-ids 1,2,3 [--max-new-tokens N] [--logits-out F.npy]\n",
                                   &llvm::errs()))
    return 1;
  if (importCmd) return importMain();
  if (runCmd) return runMain();
  return compileMain();
}
