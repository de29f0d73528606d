//===- ModelTextTest.h - Parsing generated model text in tests -*- C++ -*-===//
//
// The fixture of the builder tests: an MLIR context with the gpipe dialect
// and a parse that verifies and reports the diagnostics on failure.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_TEST_UNIT_MODELTEXTTEST_H
#define GPIPE_TEST_UNIT_MODELTEXTTEST_H

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <string>

namespace gpipe::testing {

class ModelTextTest : public ::testing::Test {
protected:
  ModelTextTest() : context(makeRegistry()) {
    context.loadAllAvailableDialects();
    context.disableMultithreading();
  }

  static mlir::DialectRegistry makeRegistry() {
    mlir::DialectRegistry registry;
    registry.insert<GPipeDialect>();
    return registry;
  }

  /// Parses and verifies `text`; failures carry the diagnostics.
  mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef text) {
    std::string diagnostics;
    mlir::ScopedDiagnosticHandler handler(
        &context, [&](mlir::Diagnostic &diag) {
          llvm::raw_string_ostream(diagnostics)
              << diag.getLocation() << ": " << diag << "\n";
          return mlir::success();
        });
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    EXPECT_TRUE(module) << diagnostics;
    if (module) {
      EXPECT_TRUE(mlir::succeeded(mlir::verify(*module))) << diagnostics;
    }
    return module;
  }

  mlir::MLIRContext context;
};

} // namespace gpipe::testing

#endif // GPIPE_TEST_UNIT_MODELTEXTTEST_H
