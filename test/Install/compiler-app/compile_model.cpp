// Compiles a gpipe model file into a bundle through the installed compiler
// library: compile_model MODEL.mlir STAGES MICROBATCHES OUT.bundle.json.
#include "gpipe/Target/CompileToBundle.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

int main(int argc, char **argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL STAGES MICROBATCHES OUT\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "cannot open %s\n", argv[1]);
    return 3;
  }
  std::stringstream source;
  source << in.rdbuf();
  gpipe::CompilePipelineOptions options;
  options.numStages = unsigned(std::atoi(argv[2]));
  options.numMicrobatches = unsigned(std::atoi(argv[3]));
  std::string bundle, diagnostics;
  if (mlir::failed(gpipe::compileSourceToBundle(source.str(), options, bundle,
                                                diagnostics))) {
    std::fprintf(stderr, "%s", diagnostics.c_str());
    return 1;
  }
  std::ofstream(argv[4]) << bundle;
  std::printf("compiled %s into %s stages, %s micro-batches\n", argv[1],
              argv[2], argv[3]);
  return 0;
}
