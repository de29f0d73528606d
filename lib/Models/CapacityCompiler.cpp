//===- CapacityCompiler.cpp - Compile models and read their plans ---------===//
//
// Each model of a capacity study is parsed from generated gpipe text, compiled
// by gpipe-compile, and judged by the `gpipe.memory` dictionary that
// gpipe-plan-memory leaves on every device's program.
//
//===----------------------------------------------------------------------===//

#include "gpipe/Models/Capacity.h"

#include "gpipe/Dialect/GPipe/IR/GPipeDialect.h"
#include "gpipe/Dialect/GPipe/IR/GPipeOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <chrono>

using namespace mlir;
using namespace gpipe;

struct CapacityCompiler::Impl {
  explicit Impl(CapacityCompileOptions options)
      : compileOptions(options), context(makeRegistry()) {
    context.loadAllAvailableDialects();
    context.disableMultithreading();
  }

  static DialectRegistry makeRegistry() {
    DialectRegistry registry;
    registry.insert<GPipeDialect>();
    return registry;
  }

  std::optional<std::vector<DeviceMemoryUse>>
  run(const TransformerConfig &model, int64_t stages, int64_t microbatches,
      RematPolicy remat, std::string &error) {
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      llvm::raw_string_ostream os(diagnostics);
      os << "  " << diag.getLocation() << ": "
         << (diag.getSeverity() == DiagnosticSeverity::Error ? "error: " : "")
         << diag << "\n";
      for (const Diagnostic &note : diag.getNotes())
        os << "    note: " << note << "\n";
      return success();
    });
    std::string what = llvm::formatv(
        "compiling {0} blocks on {1} devices with {2} micro-batches (remat "
        "{3})",
        model.blocks, stages, microbatches, stringifyRematPolicy(remat));
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(buildTransformerModel(model), &context);
    if (!module) {
      error =
          what + " failed: the generated model does not parse:\n" + diagnostics;
      return std::nullopt;
    }
    CompilePipelineOptions options;
    options.numStages = unsigned(stages);
    options.numMicrobatches = unsigned(microbatches);
    options.objective = compileOptions.objective;
    options.remat = remat;
    options.optimizerSlots = compileOptions.optimizerSlots;
    PassManager pm(&context);
    buildCompilePipeline(pm, options);
    if (failed(pm.run(*module))) {
      error = what + " failed:\n" + diagnostics;
      return std::nullopt;
    }
    auto schedules = llvm::to_vector(module->getOps<ScheduleOp>());
    if (schedules.size() != 1) {
      error = what + ": expected one gpipe.schedule after gpipe-compile, got " +
              std::to_string(schedules.size());
      return std::nullopt;
    }
    std::vector<DeviceMemoryUse> devices;
    for (ProgramOp program :
         schedules.front().getBody().front().getOps<ProgramOp>()) {
      std::string device = std::to_string(program.getDevice());
      auto memory = program->getAttrOfType<DictionaryAttr>("gpipe.memory");
      if (!memory) {
        error = what + ": gpipe.program device " + device +
                " has no \"gpipe.memory\" dictionary; the gpipe-compile "
                "pipeline must end with gpipe-plan-memory";
        return std::nullopt;
      }
      DeviceMemoryUse entry;
      for (auto [key, field] : {std::pair<const char *, int64_t *>{
                                    "resident_bytes", &entry.resident},
                                {"peak_bytes", &entry.peak},
                                {"arena_bytes", &entry.arena},
                                {"num_buffers", &entry.buffers}}) {
        auto value = memory.getAs<IntegerAttr>(key);
        if (!value) {
          error = what + ": the \"gpipe.memory\" dictionary of device " +
                  device + " has no integer \"" + key + "\"";
          return std::nullopt;
        }
        *field = value.getInt();
      }
      devices.push_back(entry);
    }
    if (int64_t(devices.size()) != stages) {
      error = what + ": expected " + std::to_string(stages) +
              " programs, got " + std::to_string(devices.size());
      return std::nullopt;
    }
    return devices;
  }

  CapacityCompileOptions compileOptions;
  MLIRContext context;
};

CapacityCompiler::CapacityCompiler(CapacityCompileOptions options)
    : impl(std::make_unique<Impl>(options)) {}

CapacityCompiler::~CapacityCompiler() = default;

std::optional<std::vector<DeviceMemoryUse>>
CapacityCompiler::compile(const TransformerConfig &model, int64_t stages,
                          int64_t microbatches, RematPolicy remat,
                          std::string &error) {
  ++numCompiles;
  auto start = std::chrono::steady_clock::now();
  auto result = impl->run(model, stages, microbatches, remat, error);
  compileSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  return result;
}
