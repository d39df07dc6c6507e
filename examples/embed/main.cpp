// examples/embed/main.cpp — generating tokens from an application through minfer's C++ API.
//
//   minfer_embed MODEL [--weights PATH] PROMPT_IDS [MAX_NEW_TOKENS]
//   minfer_embed tests/golden/fixtures/llama_gqa 449,229,25 8
//
// MODEL is an .ir file, a .mfb bundle or a Hugging Face checkpoint directory. Prints the generated token ids
// on one line. On a machine without a CUDA driver it fails with "no CUDA driver: ..." and exit code 1.
#include <minfer/minfer.hpp>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  minfer::EngineOptions engineOptions;
  for (size_t i = 0; i + 1 < args.size(); ++i)
    if (args[i] == "--weights") {
      engineOptions.weights = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      break;
    }
  if (args.size() < 2 || args.size() > 3) {
    std::cerr << "usage: minfer_embed MODEL [--weights PATH] PROMPT_IDS [MAX_NEW_TOKENS]\n";
    return 1;
  }
  std::vector<int32_t> prompt;
  std::stringstream ids(args[1]);
  for (std::string id; std::getline(ids, id, ',');) prompt.push_back(static_cast<int32_t>(std::atoi(id.c_str())));

  minfer::Result<minfer::Engine> engine = minfer::Engine::load(args[0], engineOptions);
  if (!engine) {
    std::cerr << "minfer_embed: " << engine.error() << "\n";
    return 1;
  }
  minfer::Result<minfer::Session> session = engine->createSession();
  if (!session) {
    std::cerr << "minfer_embed: " << session.error() << "\n";
    return 1;
  }
  minfer::GenerationOptions options;
  options.maxNewTokens = args.size() > 2 ? std::atoi(args[2].c_str()) : 16;
  minfer::Result<minfer::Generation> out = session->generate({prompt}, options);
  if (!out) {
    std::cerr << "minfer_embed: " << out.error() << "\n";
    return 1;
  }
  for (size_t i = 0; i < out->tokens[0].size(); ++i) std::cout << (i ? "," : "") << out->tokens[0][i];
  std::cout << "\n";
  minfer::LoadInfo info = engine->loadInfo();
  std::cerr << "minfer_embed: " << info.device << " (" << info.target << "), " << info.kernels << " kernels, "
            << out->decodeSteps << " decode steps in " << out->decodeMs << " ms\n";
  return 0;
}
