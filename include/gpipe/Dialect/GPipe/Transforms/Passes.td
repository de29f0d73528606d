//===- Passes.td - gpipe passes -----------------------------*- tablegen -*-===//

#ifndef GPIPE_PASSES_TD
#define GPIPE_PASSES_TD

include "mlir/Pass/PassBase.td"

def SetBatchPass : Pass<"gpipe-set-batch", "::mlir::ModuleOp"> {
  let summary = "changes the mini-batch size of a model of layers";
  let description = [{
    Rewrites every `gpipe.model` to the mini-batch `batch`: the model's
    `batch`, the leading dimension of every input and of every value computed
    per example from them (decided by dataflow, as the bundle does:
    parameters and losses keep their shapes even when a dimension happens to
    equal the old batch). Runs before `gpipe-form-stages`. Costs written by
    hand are kept as they are; `gpipe-estimate-cost` recomputes the others.

    Before (`batch=128`): `gpipe.model @mlp batch 64 { %x = gpipe.input "x" : tensor<64x784xf32> ...`
    After:  `gpipe.model @mlp batch 128 { %x = gpipe.input "x" : tensor<128x784xf32> ...`

    With `replicas=R` (data parallelism), the model gets the mini-batch's
    R-th part, `batch / R` rows (the model's own batch when `batch` is 0):
    each replica runs that program on its slice. R must divide the batch.
  }];
  let options = [
    Option<"batch", "batch", "int64_t", /*default=*/"0",
           "the new mini-batch size (> 0; 0 with replicas > 1: the model's)">,
    Option<"replicas", "replicas", "unsigned", /*default=*/"1",
           "data-parallel replicas: each one's program gets 1/replicas of "
           "the mini-batch">,
  ];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def SetPrecisionPass : Pass<"gpipe-set-precision", "::mlir::ModuleOp"> {
  let summary = "records the precision the model's products read operands in";
  let description = [{
    Sets `gpipe.precision` on every `gpipe.model`: the precision in which
    the GEMMs of dense layers, matmuls, convolutions and attention read
    their operands, `f32`, `tf32` or `bf16` (accumulation is f32 in every
    case). The bundle records it and the runtime computes in it: the CUDA
    backend's cuBLAS GEMMs, the host emulation's operands rounded as the
    GPU's, the CPU threads' in f32 (docs/Cuda.md).

    After (`precision=bf16`):
    `gpipe.model @mlp batch 64 attributes {gpipe.precision = "bf16"} { ... }`
  }];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"f32\"",
           "f32, tf32 or bf16">,
  ];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def EstimateCostPass : Pass<"gpipe-estimate-cost", "::mlir::ModuleOp"> {
  let summary = "fills in the cost of every op and layer from shapes";
  let description = [{
    Writes `cost = #gpipe.cost<flops, param_bytes, activation_bytes>` on each
    compute op that has none, from its operand and result shapes, then on each
    layer that has none as the sum over its ops. A cost written by the user,
    on an op or on a layer, is never replaced.

    Before: `%0 = gpipe.relu %x : tensor<32x256xf32>`
    After:  `%0 = gpipe.relu %x {cost = #gpipe.cost<flops = 8192, param_bytes = 0, activation_bytes = 32768>} : tensor<32x256xf32>`
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def SplitLayersPass : Pass<"gpipe-split-layers", "::mlir::ModuleOp"> {
  let summary = "cuts layers with several heavy ops into finer layers";
  let description = [{
    Needs costs (see `gpipe-estimate-cost`). Cuts a layer before each op that
    costs at least a quarter of the layer's FLOPs and follows another such op
    in it, where the ops before the cut define one value that the ops after
    it (or the layer's results) read, and no parameter is read on both sides.
    The pieces are layers named `<layer>:1`, `<layer>:2`, ..., each with the
    parameters it reads and its share of the cost. A layer whose cost was
    written by hand (not its ops' sum) stays whole. The partitioner can then
    cut a Transformer's feed-forward block between its two products, which
    the balance under remat often wants.

    Before: `%h = gpipe.layer "mlp" {ln, dense, gelu, dense, add}`
    After:  `%0 = gpipe.layer "mlp:1" {ln, dense, gelu}` and
            `%h = gpipe.layer "mlp:2" {dense, add}`
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def PartitionPass : Pass<"gpipe-partition", "::mlir::ModuleOp"> {
  let summary = "assigns the layers to `stages` balanced contiguous cells";
  let description = [{
    Needs a cost on every layer (see `gpipe-estimate-cost`). Solves the
    partition exactly for the chosen objective: `variance` (GPipe's: the most
    even cell costs) or `bottleneck` (the smallest largest cell). Ties go to
    the partition that sends the fewest bytes across its cuts. A cell's cost
    is its compute times the work its device does per unit of it
    (`balance=work`): a forward, a backward of twice its cost and, for each
    micro-batch whose backward recomputes under `schedule` and `remat`, one
    more forward. Under 1f1b with remat the last device never recomputes,
    so it gets more layers; `balance=compute` balances the costs alone. With
    `memory-cap`, the device holding each cell must fit. By default
    (`memory-model=plan`) a cell's memory is what gpipe-plan-memory will
    plan for it: the model is compiled once with one layer per stage and the
    stages of a candidate cell are joined and replayed under `schedule`
    (under 1f1b at the most demanding position the cell can take). `memory-model=cost` uses the closed form of the layers' cost
    attributes instead (parameters x (2 + optimizer-slots), the stashed
    boundary inputs of all micro-batches and, with remat, one micro-batch's
    activations), for costs written by hand.

    Writes `cell = c` on each layer and a `gpipe.partition` summary on the
    model.
  }];
  let options = [
    Option<"numStages", "stages", "unsigned", "1",
           "number of cells (one pipeline stage per device)">,
    Option<"numStagesAlias", "num-stages", "unsigned", "0",
           "the old spelling of stages, still accepted">,
    Option<"objective", "objective", "::gpipe::PartitionObjective",
           "::gpipe::PartitionObjective::Variance",
           "partition objective", [{::llvm::cl::values(
             clEnumValN(::gpipe::PartitionObjective::Variance, "variance",
                        "minimise the variance of cell costs (GPipe)"),
             clEnumValN(::gpipe::PartitionObjective::Bottleneck, "bottleneck",
                        "minimise the largest cell cost"))}]>,
    Option<"balance", "balance", "::gpipe::PartitionBalance",
           "::gpipe::PartitionBalance::Work",
           "what the cells balance", [{::llvm::cl::values(
             clEnumValN(::gpipe::PartitionBalance::Work, "work",
                        "each cell's compute times its device's forwards, "
                        "backwards and recomputes per unit (by schedule and "
                        "remat)"),
             clEnumValN(::gpipe::PartitionBalance::Compute, "compute",
                        "the layers' cost attributes alone"))}]>,
    Option<"numVirtualStages", "virtual-stages", "unsigned", "1",
           "stages per device under schedule=interleaved; stages is a "
           "multiple of it">,
    Option<"memoryCap", "memory-cap", "std::string", "\"\"",
           "per-device memory cap, e.g. 512MiB, 2GiB or 1000000 (bytes); "
           "empty for none">,
    Option<"numMicrobatches", "microbatches", "unsigned", "1",
           "micro-batches per mini-batch (for the memory model)">,
    Option<"numMicrobatchesAlias", "num-microbatches", "unsigned", "0",
           "the old spelling of microbatches, still accepted">,
    Option<"remat", "remat", "::gpipe::RematPolicy",
           "::gpipe::RematPolicy::Full",
           "rematerialisation policy assumed by the memory model",
           [{::llvm::cl::values(
             clEnumValN(::gpipe::RematPolicy::None, "none",
                        "keep every activation of every micro-batch"),
             clEnumValN(::gpipe::RematPolicy::Full, "full",
                        "recompute each stage's forward in its backward"),
             clEnumValN(::gpipe::RematPolicy::ExceptLast, "except-last",
                        "as full, but the last micro-batch keeps its values"),
             clEnumValN(::gpipe::RematPolicy::Selective, "selective",
                        "as full, but the products' results stay"))}]>,
    Option<"optimizerSlots", "optimizer-slots", "unsigned", "2",
           "optimizer state tensors per parameter (Adam: 2, momentum: 1)">,
    Option<"schedule", "schedule", "::gpipe::schedule::ScheduleKind",
           "::gpipe::schedule::ScheduleKind::GPipe",
           "schedule assumed by the memory model",
           [{::llvm::cl::values(
             clEnumValN(::gpipe::schedule::ScheduleKind::GPipe, "gpipe",
                        "fill, then drain (GPipe)"),
             clEnumValN(::gpipe::schedule::ScheduleKind::OneFOneB, "1f1b",
                        "warm up, then one forward and one backward in turn"),
             clEnumValN(::gpipe::schedule::ScheduleKind::ZeroBubbleH1, "zb-h1",
                        "1F1B with split backwards, W deferred into the bubble"),
             clEnumValN(::gpipe::schedule::ScheduleKind::Interleaved,
                        "interleaved",
                        "1F1B over virtual-stages stages per device"))}]>,
    Option<"sendWindow", "send-window", "unsigned", "0",
           "the send window the schedule will have (gpipe-unroll-schedule's "
           "send-window): the memory model keeps each sent value until its "
           "wait">,
    Option<"memoryModel", "memory-model", "::gpipe::CellMemoryEstimate",
           "::gpipe::CellMemoryEstimate::Plan",
           "how a cell's memory is sized against memory-cap",
           [{::llvm::cl::values(
             clEnumValN(::gpipe::CellMemoryEstimate::Plan, "plan",
                        "the memory planner's arena for the cell"),
             clEnumValN(::gpipe::CellMemoryEstimate::Cost, "cost",
                        "the closed form of the layers' cost attributes"))}]>,
  ];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def FormStagesPass : Pass<"gpipe-form-stages", "::mlir::ModuleOp"> {
  let summary = "outlines each cell into a gpipe.stage with explicit inputs and outputs";
  let description = [{
    Needs `cell` on every layer. Each run of layers of one cell becomes a
    `gpipe.stage` whose operands are the model inputs it reads and the values
    of the previous stage it needs; a value needed by a later, non-adjacent
    stage (a skip connection) is passed through every stage in between, so
    each stage talks only to its neighbours.
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def DifferentiatePass : Pass<"gpipe-differentiate", "::mlir::ModuleOp"> {
  let summary = "gives every stage its backward";
  let description = [{
    Needs stages. After each model's stages, writes one
    `gpipe.stage_backward` per stage: a flattened copy of the stage's forward
    (ops marked `gpipe.recompute`, parameters read by `gpipe.param_ref`)
    followed by reverse-mode gradient ops (`gpipe.dense_grad`,
    `gpipe.layer_norm_grad`, ...). Gradients of a value used more than once
    are summed; parameter gradients are accumulated with
    `gpipe.accumulate_grad` (they add up over micro-batches); the gradients
    of the inputs received from the previous stage are yielded. The loss
    gradient is scaled at run time by the micro-batch's share of the batch.
    Copies of forward ops that no gradient reads, directly or through other
    copies, are dropped (a GELU whose gradient reads its input, a stage's
    last ReLU): the recompute rebuilds only what the backward reads.
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def RematerializePass : Pass<"gpipe-rematerialize", "::mlir::ModuleOp"> {
  let summary = "chooses what each stage keeps from its forward for its backward";
  let description = [{
    Needs stage backwards. Writes the policy on each `gpipe.stage_backward`:
    `full` (GPipe: keep the stage's inputs of each in-flight micro-batch and
    run the recompute prefix in the backward), `none` (keep every forward
    value; skip the recompute), `except-last` (the last micro-batch, first
    to come back, keeps its values; the others recompute) or `selective`
    (as `full`, but the results of the products, the ops of at least 16
    FLOPs per element they write with their saved state — a dense, an
    attention, a convolution — stay for the backward, and the recompute
    reruns only the cheap ops the gradients read past them: norms,
    activations, dropout, residual adds). Dropout masks are
    functions of the op's seed, the step and the row, so recomputation
    reproduces them exactly.
  }];
  let options = [
    Option<"policy", "policy", "::gpipe::RematPolicy",
           "::gpipe::RematPolicy::Full", "rematerialisation policy",
           [{::llvm::cl::values(
             clEnumValN(::gpipe::RematPolicy::None, "none",
                        "keep every forward value"),
             clEnumValN(::gpipe::RematPolicy::Full, "full",
                        "recompute each stage's forward in its backward"),
             clEnumValN(::gpipe::RematPolicy::ExceptLast, "except-last",
                        "as full, but the last micro-batch keeps its values"),
             clEnumValN(::gpipe::RematPolicy::Selective, "selective",
                        "as full, but the products' results stay"))}]>,
  ];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def InsertSendRecvPass : Pass<"gpipe-insert-send-recv", "::mlir::ModuleOp"> {
  let summary = "connects adjacent stages with send/recv channels";
  let description = [{
    Needs stages. Every stage input that is a result of the previous stage is
    routed through a `gpipe.send` after the producer and a `gpipe.recv` before
    the consumer; channel i of a boundary is result i of the producing stage.
    Each channel carries the activation forward and its gradient backward.
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def UnrollSchedulePass : Pass<"gpipe-unroll-schedule", "::mlir::ModuleOp"> {
  let summary = "unrolls the micro-batch schedule into one program per device";
  let description = [{
    Needs the form gpipe-form-stages and gpipe-insert-send-recv produce:
    every layer in a stage, stage i at position i, and every result of a
    non-last stage sent to the next stage exactly once on channel c = result
    c, with the batch as leading dimension, and received there with the same
    type. Writes a `gpipe.schedule` next to each model, device s running
    stage s (with `virtual-stages=V`, the K = stages / V devices run the
    stages round-robin: stage s on device s mod K), with gradient
    accumulation across micro-batches and exactly one
    optimizer step. `schedule=gpipe`: forwards for micro-batches 0..M-1
    (fill), then backwards for M-1..0 (drain), each with its receives before
    and sends after. `schedule=1f1b` (PipeDream-flush): device s runs
    min(K-s-1, M) forwards, then one forward and one backward in turn, so it
    holds at most K-s micro-batches instead of M. `schedule-file` reads each
    device's order of forwards and backwards ("device 0: F0 F1 B0 F2 B1
    B2"); an order that repeats, misses or deadlocks is an error naming the
    device, the action and the micro-batch. For every order but gpipe's the
    transfers are placed by simulating the devices, so that the programs
    cannot deadlock even when every send blocks until it is received. A
    batch not divisible by M is split into micro-batches whose row counts
    differ by at most one (the first batch % M get one more). With
    `send-window=N` the sends complete in the background: before a send that
    would put N + 1 sends to one peer in flight, the device waits for the
    oldest of them (`gpipe.wait_send_activation`/`_gradient`), and before its
    optimizer step for all that are left.
  }];
  let options = [
    Option<"numMicrobatches", "microbatches", "unsigned", "1",
           "micro-batches per mini-batch">,
    Option<"numMicrobatchesAlias", "num-microbatches", "unsigned", "0",
           "the old spelling of microbatches, still accepted">,
    Option<"schedule", "schedule", "::gpipe::schedule::ScheduleKind",
           "::gpipe::schedule::ScheduleKind::GPipe",
           "the order of forwards and backwards on each device",
           [{::llvm::cl::values(
             clEnumValN(::gpipe::schedule::ScheduleKind::GPipe, "gpipe",
                        "fill, then drain (GPipe)"),
             clEnumValN(::gpipe::schedule::ScheduleKind::OneFOneB, "1f1b",
                        "warm up, then one forward and one backward in turn"),
             clEnumValN(::gpipe::schedule::ScheduleKind::ZeroBubbleH1, "zb-h1",
                        "1F1B with split backwards, W deferred into the bubble"),
             clEnumValN(::gpipe::schedule::ScheduleKind::Interleaved,
                        "interleaved",
                        "1F1B over virtual-stages stages per device"))}]>,
    Option<"scheduleFile", "schedule-file", "std::string", "\"\"",
           "read each device's order of forwards and backwards from this "
           "file instead">,
    Option<"numVirtualStages", "virtual-stages", "unsigned", "1",
           "stages per device (V): K = stages / V devices run them "
           "round-robin (schedule=interleaved, or a schedule file that names "
           "stages)">,
    Option<"numVirtualStagesAlias", "num-virtual-stages", "unsigned", "0",
           "the old spelling of virtual-stages, still accepted">,
    Option<"sendWindow", "send-window", "unsigned", "0",
           "0: a send is done when issued; N >= 1: sends complete in the "
           "background, each awaited by a placed wait_send, at most N in "
           "flight to each peer">,
  ];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def VerifySchedulePass : Pass<"gpipe-verify-schedule", "::mlir::ModuleOp"> {
  let summary = "proves that every unrolled schedule is sound";
  let description = [{
    For each `gpipe.schedule`: every send has exactly one matching recv (same
    peer, micro-batch, channel, shape and type), no ordering can deadlock even
    when sends block until received, each stage's forward precedes its
    backward for each micro-batch and follows the arrival of its inputs, and
    each device steps its optimizer exactly once, last. Against the model:
    device s runs stage s, rows add up to the batch, every forward loads the
    inputs its stage reads (and no others), every channel is sent and
    received for every micro-batch with its type between neighbours. Errors
    name the device, the micro-batch and the op.
  }];
  let dependentDialects = ["::gpipe::GPipeDialect"];
}

def PlanMemoryPass : Pass<"gpipe-plan-memory", "::mlir::ModuleOp"> {
  let summary = "plans each device's static memory arena over the unrolled schedule";
  let description = [{
    Replays each device's instruction stream (after gpipe-unroll-schedule)
    with the runtime's allocation rules: parameters, gradients and optimizer
    slots stay resident; every value of a micro-batch is allocated by the op
    or instruction that defines, receives or loads it and freed after its last
    use, except what the stage keeps for its backward (the stage inputs under
    remat `full`, the values the backward reads under `none`) and what waits
    to be sent. Every buffer gets an arena offset (greedy by size over the
    liveness intervals), and each `gpipe.program` gets a `gpipe.memory`
    dictionary: resident_bytes, peak_bytes (largest sum of live bytes),
    arena_bytes (the static arena: >= peak_bytes), peak_op (the instruction
    at the peak), num_buffers. With `memory-cap`, a device whose arena does
    not fit is an error naming the device, the shortfall and what would fit.
  }];
  let options = [
    Option<"optimizerSlots", "optimizer-slots", "unsigned", "2",
           "optimizer state tensors per parameter (Adam: 2, momentum: 1)">,
    Option<"memoryCap", "memory-cap", "std::string", "\"\"",
           "per-device memory cap, e.g. 512MiB or 2GiB">,
  ];
}

def ReportPass : Pass<"gpipe-report", "::mlir::ModuleOp"> {
  let summary = "prints the partition and schedule report";
  let description = [{
    For each model with stages: per cell its layers, cost, memory and bytes
    sent; the imbalance (largest / mean cell cost); the bubble fraction
    (K-1)/(M+K-1) of balanced cells and the one predicted by replaying the
    schedule with the real cell costs. `format` is text or json.

    With `simulate`, the schedule's step is simulated under the runtime's
    execution model (each device's compute stream runs its program in order,
    its copy stream its sends; a receive waits for its send and the link's
    latency): the step time, the bubble, and each device's busy and idle
    time. Costs come from the cost model (`device-gflops`, `link-gb-per-s`,
    `link-latency-us`) or, with `profile`, from a step measured by
    `gpipe-run --profile`. `trace` writes the simulated timeline as a Chrome
    trace, in the format of `gpipe-run --trace`, so that the two can be laid
    side by side. `processors` limits how many devices compute at once (CPU
    devices are threads that share the machine's cores).
  }];
  let options = [
    Option<"format", "format", "std::string", "\"text\"",
           "report format: text or json">,
    Option<"output", "output", "std::string", "\"-\"",
           "file to write the report to ('-' for stdout)">,
    Option<"simulate", "simulate", "bool", "false",
           "simulate the step of the schedule">,
    Option<"profile", "profile", "std::string", "\"\"",
           "simulate with the costs measured by gpipe-run --profile">,
    Option<"trace", "trace", "std::string", "\"\"",
           "write the simulated timeline here (Chrome trace JSON)">,
    Option<"deviceGflops", "device-gflops", "double", "10.0",
           "cost model: sustained GFLOP/s of a device">,
    Option<"linkGBPerSecond", "link-gb-per-s", "double", "10.0",
           "cost model: GB/s of the link between adjacent devices">,
    Option<"linkLatencyUs", "link-latency-us", "double", "5.0",
           "cost model: microseconds of latency per transfer">,
    Option<"processors", "processors", "unsigned", "0",
           "processors the devices share (CPU threads on fewer cores); 0: "
           "one per device">,
  ];
}

#endif // GPIPE_PASSES_TD
