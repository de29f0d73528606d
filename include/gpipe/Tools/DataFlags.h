//===- DataFlags.h - A training tool's data options -------------*- C++ -*-===//
//
// What gpipe-run trains on: --dataset, --data (Fashion-MNIST), --corpus (a
// text), and the text loop's validation cadence, in their own help category.
// Header-only: it defines the options, so exactly one source file of a tool
// includes it.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TOOLS_DATAFLAGS_H
#define GPIPE_TOOLS_DATAFLAGS_H

#include "gpipe/Support/OptionParsers.h"

#include "llvm/Support/CommandLine.h"

#include <string>

namespace gpipe::tools {

static llvm::cl::OptionCategory dataCategory("Data");
enum class DatasetKind { Auto, Images, Text };
static llvm::cl::opt<DatasetKind> datasetKind(
    "dataset", llvm::cl::desc("what to train on"),
    llvm::cl::init(DatasetKind::Auto),
    llvm::cl::values(clEnumValN(DatasetKind::Auto, "auto",
                                "text for inputs ids, positions and targets"),
                     clEnumValN(DatasetKind::Images, "fashion-mnist",
                                "image classification (--data)"),
                     clEnumValN(DatasetKind::Text, "text",
                                "character language model (--corpus)")),
    llvm::cl::cat(dataCategory));
static llvm::cl::opt<std::string>
    dataDir("data", llvm::cl::init("/usr/share/datasets/fashion-mnist"),
            llvm::cl::desc("directory of the Fashion-MNIST IDX files"),
            llvm::cl::cat(dataCategory));
static llvm::cl::opt<std::string> corpusPath(
    "corpus", llvm::cl::init("/usr/share/games/fortunes"),
    llvm::cl::desc("text corpus: a directory of fortune files or a file"),
    llvm::cl::cat(dataCategory));
static Count
    evalEvery("eval-every", llvm::cl::init(100),
              llvm::cl::desc("text: validation loss every this many steps"),
              llvm::cl::cat(dataCategory));
static Count evalBatches(
    "eval-batches", llvm::cl::init(8),
    llvm::cl::desc("text: validation batches per evaluation (0: every window); "
                   "images, where given: test batches per epoch's accuracy "
                   "(default: the whole test set)"),
    llvm::cl::Hidden, llvm::cl::cat(dataCategory));

} // namespace gpipe::tools

#endif // GPIPE_TOOLS_DATAFLAGS_H
