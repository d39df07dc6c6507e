// examples/embed/main.cpp — generating from an application through minfer's C++ API, ids or text.
//
//   minfer_embed MODEL [--weights PATH] PROMPT_IDS [MAX_NEW_TOKENS]
//   minfer_embed MODEL [--weights PATH] --tokenizer DIR --text PROMPT [MAX_NEW_TOKENS]
//   minfer_embed tests/golden/fixtures/llama_gqa 449,229,25 8
//
// MODEL is an .ir file, a .mfb bundle or a Hugging Face checkpoint directory. With PROMPT_IDS, prints the
// generated token ids on one line. With --text, tokenizes the prompt with the checkpoint's tokenizer (BOS
// as it says; the ids go to stderr), streams the generated text to stdout as it comes and stops at the
// tokenizer's EOS. On a machine without a CUDA driver the model fails to load with "no CUDA driver: ..."
// and exit code 1 (the tokenizer works without one).
#include <minfer/minfer.hpp>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Removes `--name VALUE` from args; its value, if given.
std::optional<std::string> takeOption(std::vector<std::string> &args, const std::string &name) {
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == name) {
      std::string value = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      return value;
    }
  return std::nullopt;
}

int failure(const std::string &message) {
  std::cerr << "minfer_embed: " << message << "\n";
  return 1;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  minfer::EngineOptions engineOptions;
  engineOptions.weights = takeOption(args, "--weights").value_or("");
  std::optional<std::string> tokenizerDir = takeOption(args, "--tokenizer");
  std::optional<std::string> text = takeOption(args, "--text");
  size_t positional = text ? 1 : 2; // MODEL, and PROMPT_IDS unless --text
  if (args.size() < positional || args.size() > positional + 1 || (text.has_value() != tokenizerDir.has_value())) {
    std::cerr << "usage: minfer_embed MODEL [--weights PATH] PROMPT_IDS [MAX_NEW_TOKENS]\n"
                 "       minfer_embed MODEL [--weights PATH] --tokenizer DIR --text PROMPT [MAX_NEW_TOKENS]\n";
    return 1;
  }
  minfer::GenerationOptions options;
  options.maxNewTokens = args.size() > positional ? std::atoi(args[positional].c_str()) : 16;

  // The prompt: ids as given, or the text through the checkpoint's tokenizer.
  std::vector<int32_t> prompt;
  std::optional<minfer::Tokenizer> tokenizer;
  if (text) {
    minfer::Result<minfer::Tokenizer> t = minfer::Tokenizer::load(*tokenizerDir);
    if (!t) return failure(t.error());
    tokenizer = std::move(*t);
    minfer::Result<std::vector<int32_t>> ids = tokenizer->encode(*text, /*addBos=*/true);
    if (!ids) return failure(ids.error());
    prompt = *ids;
    std::cerr << "minfer_embed: prompt ids";
    for (size_t i = 0; i < prompt.size(); ++i) std::cerr << (i ? "," : " ") << prompt[i];
    std::cerr << "\n";
    options.tokenizer = &*tokenizer;
    options.onToken = [](const minfer::TokenEvent &t) {
      std::cout << t.text << std::flush; // the text as it is generated
      return true;
    };
  } else {
    std::stringstream ids(args[1]);
    for (std::string id; std::getline(ids, id, ',');) prompt.push_back(static_cast<int32_t>(std::atoi(id.c_str())));
  }

  minfer::Result<minfer::Engine> engine = minfer::Engine::load(args[0], engineOptions);
  if (!engine) return failure(engine.error());
  minfer::Result<minfer::Session> session = engine->createSession();
  if (!session) return failure(session.error());
  minfer::Result<minfer::Generation> out = session->generate({prompt}, options);
  if (!out) return failure(out.error());
  if (text) {
    std::cout << "\n";
  } else {
    for (size_t i = 0; i < out->tokens[0].size(); ++i) std::cout << (i ? "," : "") << out->tokens[0][i];
    std::cout << "\n";
  }
  minfer::LoadInfo info = engine->loadInfo();
  std::cerr << "minfer_embed: " << info.device << " (" << info.target << "), " << info.kernels << " kernels, "
            << out->decodeSteps << " decode steps in " << out->decodeMs << " ms\n";
  return 0;
}
