//===- ImportOnnxTranslation.cpp - gpipe-translate --import-onnx ----------===//
//
// The translation around importOnnx: its options, the parse of the model
// text (so that the dialect's verifiers check what the importer wrote), and
// the parameters file beside the output.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Import/ImportOnnxTranslation.h"
#include "gpipe/Import/OnnxImporter.h"

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace cl = llvm::cl;

llvm::cl::OptionCategory &gpipe::importOnnxCategory() {
  static cl::OptionCategory category("--import-onnx options");
  return category;
}

namespace {
cl::opt<std::string> layerDepth(
    "layer-depth", cl::init("auto"),
    cl::desc("import-onnx: name-scope components that name a layer: auto "
             "(down to the model's numbered blocks, h.0 or layer1.0), or N "
             "(0: one node per layer)"),
    cl::value_desc("auto|N"), cl::cat(gpipe::importOnnxCategory()));
cl::opt<std::string>
    lossKind("loss",
             cl::desc("import-onnx: the loss to add when the graph has none: "
                      "softmax-cross-entropy or mse"),
             cl::cat(gpipe::importOnnxCategory()));
cl::opt<std::string>
    labelsName("labels", cl::init("labels"),
               cl::desc("import-onnx: the name of the loss's labels input"),
               cl::cat(gpipe::importOnnxCategory()));
cl::opt<int64_t>
    batchSize("batch",
              cl::desc("import-onnx: the batch, for inputs whose first "
                       "dimension is symbolic"),
              cl::init(0), cl::cat(gpipe::importOnnxCategory()));
cl::opt<bool> untieWeights(
    "untie-weights",
    cl::desc("import-onnx: import an initializer that several layers use "
             "(tied embeddings) as a copy per layer, each trained apart"),
    cl::init(false), cl::cat(gpipe::importOnnxCategory()));
cl::opt<std::string> weightsPath(
    "weights",
    cl::desc("import-onnx: where to write the parameters (default: the "
             "output's name with .safetensors)"),
    cl::value_desc("filename"), cl::cat(gpipe::importOnnxCategory()));
cl::opt<std::string>
    modelName("model-name",
              cl::desc("import-onnx: the model's symbol (default: the "
                       "input file's name)"),
              cl::cat(gpipe::importOnnxCategory()));

std::string &outputPath() {
  static std::string path;
  return path;
}

/// Where the parameters go, and how the model names that file (relative to
/// the model when both share a directory).
LogicalResult weightsFileFor(Location loc, std::string &file,
                             std::string &attribute) {
  file = weightsPath;
  if (file.empty()) {
    if (outputPath().empty() || outputPath() == "-")
      return emitError(loc)
             << "--import-onnx writes the parameters to a file beside the "
                "model: give -o FILE or --weights FILE";
    llvm::SmallString<256> path(outputPath());
    llvm::sys::path::replace_extension(path, ".safetensors");
    file = std::string(path);
  }
  llvm::SmallString<256> weights(file), model(outputPath());
  (void)llvm::sys::fs::make_absolute(weights);
  (void)llvm::sys::fs::make_absolute(model);
  attribute = llvm::sys::path::parent_path(weights) ==
                      llvm::sys::path::parent_path(model)
                  ? llvm::sys::path::filename(weights).str()
                  : std::string(weights);
  return success();
}
} // namespace

void gpipe::setImportOnnxOutput(llvm::StringRef path) {
  outputPath() = path.str();
}

void gpipe::registerImportOnnxTranslation() {
  TranslateToMLIRRegistration registration(
      "import-onnx", "import an ONNX model (opset <= 21) as a gpipe model",
      [](llvm::SourceMgr &sourceMgr,
         MLIRContext *context) -> OwningOpRef<Operation *> {
        const llvm::MemoryBuffer *input =
            sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
        Location loc =
            FileLineColLoc::get(context, input->getBufferIdentifier(), 0, 0);
        std::string file, attribute;
        if (failed(weightsFileFor(loc, file, attribute)))
          return nullptr;
        OnnxImportOptions options;
        if (layerDepth != "auto") {
          unsigned depth = 0;
          if (llvm::StringRef(layerDepth).getAsInteger(10, depth) ||
              depth > 64) {
            emitError(loc) << "--layer-depth '" << layerDepth
                           << "': expected auto or a number from 0 to 64";
            return nullptr;
          }
          options.layerDepth = int(depth);
        }
        options.loss = lossKind;
        options.labels = labelsName;
        options.batch = batchSize;
        options.weightsFile = attribute;
        options.modelName = modelName;
        options.untieWeights = untieWeights;
        if (options.modelName.empty())
          options.modelName = onnxModelName(
              llvm::sys::path::stem(input->getBufferIdentifier()).str());
        OnnxImport imported;
        std::string error = importOnnx(
            std::string_view(input->getBufferStart(), input->getBufferSize()),
            options, imported);
        if (!error.empty()) {
          emitError(loc) << error;
          return nullptr;
        }
        context->loadDialect<GPipeDialect>();
        OwningOpRef<ModuleOp> module =
            parseSourceString<ModuleOp>(imported.mlir, context, "imported");
        if (!module) {
          emitError(loc) << "internal error: the imported model does not "
                            "verify (the diagnostics above point into it)";
          return nullptr;
        }
        if (!imported.weights.empty()) {
          std::string bytes = runtime::encodeSafeTensors(
              imported.weights,
              {{"source", "gpipe-translate --import-onnx " +
                              input->getBufferIdentifier().str()}});
          std::error_code ec;
          llvm::raw_fd_ostream os(file, ec, llvm::sys::fs::OF_None);
          if (!ec) {
            os << bytes;
            os.close();
            ec = os.error();
          }
          if (ec) {
            emitError(loc) << "cannot write the parameters to '" << file
                           << "': " << ec.message();
            return nullptr;
          }
        }
        return module;
      },
      [](DialectRegistry &registry) { registry.insert<GPipeDialect>(); });
}
