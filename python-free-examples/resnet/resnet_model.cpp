//===- resnet_model.cpp - Write a ResNet as gpipe dialect text ------------===//
//
//   resnet_model [--blocks N] [--width W] [--batch B] [--image HxWxC]
//                [--classes K] [--momentum M] [--name NAME] [-o FILE]
//
// prints ResNet-(6N+2) (gpipe/Models/ResNetBuilder.h) for gpipe-opt or
// gpipe-run; with no options it is python-free-examples/resnet/resnet.mlir.
// Exit codes: 0 written, 2 a bad option, 3 the file cannot be written.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/ResNetBuilder.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

namespace {

constexpr const char *kUsage =
    "usage: resnet_model [--blocks N] [--width W] [--batch B] [--image HxWxC]\n"
    "                    [--classes K] [--momentum M] [--name NAME] [-o FILE]\n"
    "Writes ResNet-(6N+2) for channels-last images as gpipe dialect text.\n"
    "  --blocks N     residual blocks per group (default 1: ResNet-8)\n"
    "  --width W      channels of the first group; 2W and 4W follow (16)\n"
    "  --batch B      mini-batch size (128)\n"
    "  --image HxWxC  input images (28x28x1: Fashion-MNIST)\n"
    "  --classes K    classes (10)\n"
    "  --momentum M   batch norm's running-statistics momentum (0.1)\n"
    "  --name NAME    the model's symbol (resnet)\n"
    "  -o FILE        write there instead of to stdout\n";

int usageError(const std::string &message) {
  std::cerr << "resnet_model: error: " << message << "\n" << kUsage;
  return 2;
}

bool parseInt(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0')
    return false;
  out = value;
  return true;
}

} // namespace

int main(int argc, char **argv) {
  gpipe::ResNetConfig config;
  std::string output;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (size_t eq = arg.find('=');
        arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return usageError("option " + arg + " expects a value");
    }
    auto integer = [&](int64_t &out) {
      return parseInt(value, out)
                 ? 0
                 : usageError("option " + arg + " expects an integer, got '" +
                              value + "'");
    };
    int status = 0;
    if (arg == "--blocks")
      status = integer(config.blocksPerGroup);
    else if (arg == "--width")
      status = integer(config.width);
    else if (arg == "--batch")
      status = integer(config.batch);
    else if (arg == "--classes")
      status = integer(config.classes);
    else if (arg == "--name")
      config.name = value;
    else if (arg == "-o")
      output = value;
    else if (arg == "--momentum") {
      char *end = nullptr;
      config.momentum = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0')
        return usageError("option --momentum expects a number, got '" + value +
                          "'");
    } else if (arg == "--image") {
      long long h = 0, w = 0, c = 0;
      char tail = 0;
      if (std::sscanf(value.c_str(), "%lldx%lldx%lld%c", &h, &w, &c, &tail) !=
          3)
        return usageError("option --image expects HxWxC, got '" + value + "'");
      config.height = h, config.imageWidth = w, config.channels = c;
    } else {
      return usageError("unknown option " + arg);
    }
    if (status != 0)
      return status;
  }
  if (std::string error = gpipe::validateResNetConfig(config); !error.empty())
    return usageError(error);
  std::string text = "// ResNet-" + std::to_string(gpipe::resnetDepth(config)) +
                     " (" +
                     std::to_string(gpipe::countResNetParameters(config)) +
                     " trainable parameters), written by resnet_model.\n" +
                     gpipe::buildResNetModel(config);
  if (output.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream file(output);
  if (!(file << text) || !file.flush()) {
    std::cerr << "resnet_model: error: cannot write '" << output
              << "': " << std::strerror(errno) << "\n";
    return 3;
  }
  return 0;
}
