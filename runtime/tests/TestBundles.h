//===- TestBundles.h - Builds pipeline bundles for the executor tests -----===//
//
// Tests describe a model once, as a graph of gpipe ops grouped into layers,
// and get the bundle the compiler would emit for any split into K stages at
// layer boundaries: values that cross a cut become channels (routed through
// every intermediate stage, so a residual's skip value is carried along),
// each stage gets its forward, a recompute copy of it and a reverse-mode
// backward (gradients of a value used twice are summed with AddGrads,
// parameter gradients go to AccumulateGrad), and the per-device programs
// come from gpipe::schedule::buildSchedule (GPipeAnalysisCore).
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_TESTS_TESTBUNDLES_H
#define GPIPE_RUNTIME_TESTS_TESTBUNDLES_H

#include "gpipe/Analysis/ScheduleKinds.h"
#include "gpipe/runtime/bundle/Bundle.h"

#include <string>
#include <vector>

namespace gpipe::runtime::testing {

/// A model as one graph in global value ids, ops in forward order.
class ModelGraph {
public:
  explicit ModelGraph(int64_t batch) : batch(batch) {}

  /// A batched model input (shape at the full batch).
  int input(const std::string &name, std::vector<int64_t> shape,
            ElementType type = ElementType::F32);
  /// Declares a parameter and emits its Param op in the current layer.
  int param(const std::string &name, std::vector<int64_t> shape, InitKind init,
            double scale = 1.0);
  int dense(int x, int w, int b = -1);
  int unary(OpKind kind, int x); ///< Relu, Gelu, GeluErf, Tanh, Softmax
  int layerNorm(int x, int gamma, int beta, float epsilon = 1e-5f);
  int add(int a, int b);
  int embedding(int ids, int table);
  /// With biases bqkv [3 width] and bo [width], or -1 and -1.
  int attention(int x, int wqkv, int wo, int64_t heads, bool causal,
                int bqkv = -1, int bo = -1);
  int dropout(int x, float rate, uint64_t seed);
  /// x [N, H, W, C] by w [KH, KW, C/groups, F] (b [F] or -1).
  int conv2d(int x, int w, int b, const WindowAttrs &attrs);
  int pool2d(OpKind kind, int x, const WindowAttrs &attrs); ///< MaxPool2d...
  int globalAvgPool(int x);
  /// Running statistics `mean` and `variance` are param values.
  int batchNorm(int x, int gamma, int beta, int mean, int variance,
                float momentum = 0.1f);
  int flatten(int x);
  int softmaxCrossEntropy(int logits, int labels);
  int mse(int prediction, int target);
  /// Starts a new layer: stages are cut only between layers.
  void nextLayer() { ++layer; }

  int numLayers() const { return layer + 1; }

  struct GraphOp {
    Op op;
    int layer = 0;
  };
  int64_t batch;
  std::vector<ValueSpec> values;
  std::vector<GraphOp> ops;
  std::vector<ParamSpec> params;
  std::vector<ModelInputSpec> inputs;
  std::vector<int> inputValues; ///< parallel to `inputs`
  int loss = -1;

private:
  int newValue(std::vector<int64_t> shape, ElementType type, bool batched);
  int emit(OpKind kind, std::vector<int> operands, ValueSpec result);
  int layer = 0;
};

/// The bundle of `graph` split into stages starting at `firstLayers`
/// (firstLayers[0] == 0, increasing), with `numMicrobatches` micro-batches
/// (split as schedule::splitMicrobatches does), the schedule `kind` and the
/// compiler's placement (TestPlacement.h). Interleaved schedules run the
/// stages on stages / numVirtualStages devices, round-robin. A send window
/// of N >= 1 gives the programs the compiler's waits for their sends
/// (schedule::placeSendWaits), and the plan keeps each sent value until its
/// wait. Aborts the test program on an inconsistent request.
Bundle buildBundle(
    const ModelGraph &graph, const std::vector<int> &firstLayers,
    unsigned numMicrobatches, RematPolicy remat,
    gpipe::schedule::ScheduleKind kind = gpipe::schedule::ScheduleKind::GPipe,
    unsigned numVirtualStages = 1, unsigned sendWindow = 0);

/// The programs of schedule `kind` (GPipe's fill-drain by default) for a
/// bundle's stages and micro-batches (through gpipe::schedule::buildSchedule),
/// converted to runtime instructions: one per device, each running
/// `numVirtualStages` stages.
std::vector<std::vector<Instr>> schedulePrograms(
    const Bundle &bundle,
    gpipe::schedule::ScheduleKind kind = gpipe::schedule::ScheduleKind::GPipe,
    unsigned numVirtualStages = 1, unsigned sendWindow = 0);

} // namespace gpipe::runtime::testing

#endif // GPIPE_RUNTIME_TESTS_TESTBUNDLES_H
