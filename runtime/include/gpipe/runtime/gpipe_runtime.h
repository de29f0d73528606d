/*===- gpipe_runtime.h - The C API of the gpipe runtime -----------*- C -*-===*\
 *
 * Embeds the gpipe CPU runtime in any application: load a compiled program
 * bundle (docs/BundleFormat.md) into a session, train it one mini-batch at a
 * time from host buffers, evaluate it, read and write its parameters, and
 * inspect the pipeline (Chrome trace of the last step, per-device peak
 * memory). A session owns one PipelineExecutor (Executor.h): K CPU devices,
 * one thread each during a training step. docs/RuntimeAPI.md walks through
 * an example; gpipe/runtime/Runtime.hpp is a thin C++ layer over this header.
 *
 * Conventions (as in IREE's runtime/session.h and NCCL's nccl.h):
 *  - `gpipe_session_t` is opaque; the caller owns the session it creates and
 *    releases it with gpipe_session_destroy.
 *  - Every fallible function returns a gpipe_status_t; GPIPE_OK is 0. Nothing
 *    is printed. The message of a failure says what was expected and what was
 *    found, prefixed with the function's name, e.g.
 *      gpipe_session_train_step: input 'x': expected 50176 f32 elements
 *      (shape [64, 784]), got 784
 *    It is read with gpipe_last_error() (the calling thread's last call) or
 *    gpipe_session_last_error() (the session's last mutating call).
 *  - Output parameters come last and are named `out_*`; unless a function
 *    says otherwise they must not be NULL. On failure the outputs are left
 *    unspecified (a created session is set to NULL).
 *  - Strings passed in are NUL-terminated and only read during the call; the
 *    session keeps no pointer to caller memory. Strings and info structs the
 *    session hands out are owned by the session and stay valid until it is
 *    destroyed.
 *  - Thread safety: functions that take a `const gpipe_session_t *` only
 *    read the session and may run concurrently with each other on the same
 *    session (the reads that copy from the devices serialize inside it). A
 *    function that takes a non-const session must not overlap any other call
 *    on that session, const ones included (serialize them; any thread may
 *    make them). Distinct sessions are independent and may be used
 *    concurrently. docs/RuntimeAPI.md states the contract and its tests.
 *  - Numbers are range-checked before use: an enum field may hold any int32
 *    (the _ENUM_MIN/_ENUM_MAX sentinels make every int32 a value of the
 *    type), and one that names no enumerator is refused.
 *  - Process-wide effect: creating a session on GPIPE_DEVICE_CPU calls
 *    openblas_set_num_threads(1), for the whole process, and never restores
 *    it (the devices' own threads use the cores; OpenBLAS's pool would
 *    compete with them). The OpenBLAS gpipe builds with (Debian 12's
 *    0.3.21) has no per-thread setting (no openblas_set_num_threads_local),
 *    so an application that calls OpenBLAS itself runs its GEMMs
 *    single-threaded after that. It may raise the count again, but
 *    then each device's GEMMs also use OpenBLAS's pool and oversubscribe the
 *    cores, and the next session creation sets it back to 1.
 *  - GPIPE_BLAS_LIBRARY (environment, read once) names another CBLAS library
 *    for the CPU products, e.g. MKL's libmkl_rt.so.2 (docs/RuntimeAPI.md).
 *
 * The header is C99; the library is C++17 and has no MLIR dependency.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_GPIPE_RUNTIME_H
#define GPIPE_RUNTIME_GPIPE_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

/* Marks the functions the shared runtime (libgpipe_runtime.so) exports; it
 * is built with hidden visibility, so nothing else is. */
#if defined(__GNUC__) || defined(__clang__)
#define GPIPE_API __attribute__((visibility("default")))
#else
#define GPIPE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this API; bumped on any incompatible change (it is the
 * shared library's SOVERSION). Compatible additions (new functions, new
 * enumerators, new fields at the end of a struct that starts with
 * struct_size) keep it. Version 2 put struct_size first in
 * gpipe_session_options_t; version 3 in gpipe_image_training_options_t and
 * gpipe_text_training_options_t. */
#define GPIPE_RUNTIME_API_VERSION 3

/* The library's version ("0.1.0"), as built. Thread-safe; never NULL. */
GPIPE_API const char *gpipe_runtime_version(void);

/* The GPIPE_RUNTIME_API_VERSION the library was built with: an application
 * compares it with the header's to detect a library it cannot use. */
GPIPE_API int gpipe_runtime_api_version(void);

/* The largest rank of a model input, parameter or prediction the C API
 * reports (gpipe_tensor_info_t::shape); sessions of bundles with larger ranks
 * fail to be created with GPIPE_ERROR_INVALID_BUNDLE. */
#define GPIPE_MAX_RANK 8

/*===----------------------------------------------------------------------===*
 * Status and errors
 *===----------------------------------------------------------------------===*/

typedef enum gpipe_status_e {
  GPIPE_OK = 0,
  /* A NULL pointer, an out-of-range value or index, a missing or duplicated
   * input, a wrong element type or count, an invalid option. */
  GPIPE_ERROR_INVALID_ARGUMENT = 1,
  /* A name (model input, parameter) that the model does not have. */
  GPIPE_ERROR_NOT_FOUND = 2,
  /* A caller buffer smaller than the data to write into it; the message
   * says how many elements are needed. */
  GPIPE_ERROR_BUFFER_TOO_SMALL = 3,
  /* A file that cannot be read or written. */
  GPIPE_ERROR_IO = 4,
  /* Bundle text that is not a valid bundle (JSON syntax, structure, or the
   * executor's semantic checks). */
  GPIPE_ERROR_INVALID_BUNDLE = 5,
  /* A device failed while running a step or an evaluation (e.g. a label
   * outside the class range, a receive timeout). The parameters and the
   * optimizer state are left as they were before the call. */
  GPIPE_ERROR_RUNTIME = 6,
  /* The session is not in the state the call needs (e.g. no timeline to
   * write before the first training step). */
  GPIPE_ERROR_FAILED_PRECONDITION = 7,
  /* An allocation failed. */
  GPIPE_ERROR_OUT_OF_MEMORY = 8,
  /* The requested backend or device does not exist on this machine (e.g. no
   * CUDA device). */
  GPIPE_ERROR_UNAVAILABLE = 9,
  /* A peer or a device did not answer within its timeout; the message names
   * who waited for what. */
  GPIPE_ERROR_DEADLINE_EXCEEDED = 10,
  /* A run stopped on request at a step boundary (gpipe-run on SIGINT or
   * SIGTERM); what it wrote is complete. */
  GPIPE_ERROR_CANCELLED = 11,
  /* Training diverged: the guard (gpipe_session_options_t::check_finite)
   * found a loss, a gradient or a parameter that is nan or infinite; the
   * message names the step, the stage and the tensor. */
  GPIPE_ERROR_NON_FINITE = 12,
  /* Not statuses: the two sentinels make the enum's range every int32
   * value (C++ defines an enum's values as those of the smallest bit-field
   * holding its enumerators), so that gpipe_status_string may be asked
   * about any value, -1 included, without undefined behaviour (found by
   * UBSan). The other enums have the same pair. */
  GPIPE_STATUS_ENUM_MIN = -0x7fffffff - 1,
  GPIPE_STATUS_ENUM_MAX = 0x7fffffff
} gpipe_status_t;

/* The enumerator's name ("GPIPE_OK", "GPIPE_ERROR_IO", ...), or
 * "GPIPE_ERROR_UNKNOWN" for a value outside the enum. The string is static.
 * Thread-safe. */
GPIPE_API const char *gpipe_status_string(gpipe_status_t status);

/* The message of the calling thread's most recent call to any gpipe_*
 * function that returns a gpipe_status_t: "" if it returned GPIPE_OK. The
 * string is owned by the library and valid until the calling thread's next
 * such call. Thread-safe (each thread has its own). Never NULL. */
GPIPE_API const char *gpipe_last_error(void);

/*===----------------------------------------------------------------------===*
 * Session options
 *===----------------------------------------------------------------------===*/

typedef enum gpipe_optimizer_e {
  GPIPE_OPTIMIZER_SGD = 0,      /* p -= lr g */
  GPIPE_OPTIMIZER_MOMENTUM = 1, /* heavy ball (TensorFlow's) */
  GPIPE_OPTIMIZER_RMSPROP = 2,  /* TensorFlow's, as in the GPipe paper */
  GPIPE_OPTIMIZER_ADAM = 3,     /* with bias correction */
  /* Adam with decoupled weight decay (Loshchilov and Hutter):
   * p -= lr (m_hat / (sqrt(v_hat) + epsilon) + weight_decay p) */
  GPIPE_OPTIMIZER_ADAMW = 4,
  /* Not optimizers: keep the enum 32-bit and any int32 value defined. */
  GPIPE_OPTIMIZER_ENUM_MIN = -0x7fffffff - 1,
  GPIPE_OPTIMIZER_ENUM_MAX = 0x7fffffff
} gpipe_optimizer_t;

/* What runs the session's pipeline devices. */
typedef enum gpipe_device_e {
  /* K CPU devices, one thread each (the default). */
  GPIPE_DEVICE_CPU = 0,
  /* CUDA GPUs, pipeline device d on GPU d % G. Needs the CUDA backend
   * (runtime/cuda, gpipe_register_cuda_backend in gpipe/cuda/gpipe_cuda.h);
   * otherwise, or without a GPU, session creation fails with
   * GPIPE_ERROR_UNAVAILABLE and a message that starts "no CUDA device". */
  GPIPE_DEVICE_CUDA = 1,
  /* The CUDA path's executor on a host emulation of streams: no GPU needed;
   * for tests. */
  GPIPE_DEVICE_HOST_EMULATION = 2,
  /* Not devices: keep the enum 32-bit and any int32 value defined. */
  GPIPE_DEVICE_ENUM_MIN = -0x7fffffff - 1,
  GPIPE_DEVICE_ENUM_MAX = 0x7fffffff
} gpipe_device_t;

/* How a session trains. Initialize with gpipe_session_options_init, then
 * change fields; runtime/include/gpipe/runtime/kernels/Optimizers.h gives each
 * optimizer's update rule.
 *
 * The struct grows at its end only, and struct_size says how much of it the
 * caller knows: a binary built against an older header passes its smaller
 * struct_size and still runs, the fields it lacks taking their defaults. The
 * library accepts any struct_size from GPIPE_SESSION_OPTIONS_MIN_SIZE (the
 * first layout, that of API version 2, up to and including `device`) to its
 * own sizeof(gpipe_session_options_t), and refuses 0, a smaller size or a
 * larger one (a struct from a newer header than the library's) with
 * GPIPE_ERROR_INVALID_ARGUMENT. */
typedef struct gpipe_session_options_t {
  /* sizeof(gpipe_session_options_t) of the caller's header; set by
   * gpipe_session_options_init. */
  size_t struct_size;
  /* Seeds the parameter initializers (with each parameter's name); equal
   * seeds give bitwise equal initial parameters. Default 0. */
  uint64_t seed;
  /* Default GPIPE_OPTIMIZER_SGD. */
  gpipe_optimizer_t optimizer;
  /* Finite, >= 0. Default 0.01. */
  float learning_rate;
  /* Momentum and RmsProp; finite, >= 0. Default 0.9. */
  float momentum;
  /* RmsProp: the decay of the mean square; in [0, 1). Default 0.9. */
  float decay;
  /* Adam; each in [0, 1). Defaults 0.9 and 0.999. */
  float beta1;
  float beta2;
  /* RmsProp and Adam; finite, >= 0. Default 1e-8. */
  float epsilon;
  /* How long a device waits for a peer (a receive, the optimizer barrier)
   * before the step fails with GPIPE_ERROR_RUNTIME; >= 1. Default 60000. */
  uint32_t recv_timeout_ms;
  /* Nonzero: record the per-device timeline of each step (needed by
   * gpipe_session_write_trace and gpipe_session_bubble_fraction). Default 1. */
  int record_timeline;
  /* Default GPIPE_DEVICE_CPU. */
  gpipe_device_t device;

  /* Fields added after the first layout (GPIPE_SESSION_OPTIONS_MIN_SIZE):
   * a caller whose struct_size ends before one gets its default. */

  /* GPIPE_DEVICE_CPU: threads per pipeline device, its own included, over
   * which it splits its kernels (results are bitwise the same for any
   * count); 0 divides the cores of the process's affinity mask among the
   * devices (at least 1 each). At most 1024. Ignored by the other devices.
   * Default 0. */
  uint32_t threads_per_device;
  /* Weight decay; finite, >= 0. SGD and momentum add weight_decay p to the
   * gradient (L2); AdamW decays decoupled from its normalised step; Adam and
   * RmsProp refuse a nonzero value (session creation fails with
   * GPIPE_ERROR_INVALID_ARGUMENT, naming AdamW). Default 0. */
  float weight_decay;
  /* Clipping by the global gradient norm: > 0 scales every gradient of
   * every stage by min(1, clip_grad_norm / (norm + 1e-6)) before the update,
   * norm the L2 norm of all the step's gradients across the devices
   * (PyTorch's clip_grad_norm_); 0: no clipping. Finite, >= 0. Default 0. */
  float clip_grad_norm;
  /* Nonzero: the guard against divergence. A step whose loss or gradients
   * are nan or infinite fails with GPIPE_ERROR_NON_FINITE before the update
   * (nothing changes); one whose update makes a parameter non-finite fails
   * with it after the update. The message names the step, the stage and
   * the tensor. Default 1 (as gpipe-run's --check-finite). */
  int check_finite;
} gpipe_session_options_t;

/* The struct_size of the first layout the library accepts (API version 2:
 * struct_size through `device`). */
#define GPIPE_SESSION_OPTIONS_MIN_SIZE                                         \
  (offsetof(gpipe_session_options_t, device) + sizeof(gpipe_device_t))

/* Sets struct_size to sizeof(gpipe_session_options_t) and every other field
 * of *out_options to its default. Does nothing if out_options is NULL.
 * Thread-safe. */
GPIPE_API void gpipe_session_options_init(gpipe_session_options_t *out_options);

/*===----------------------------------------------------------------------===*
 * Sessions
 *===----------------------------------------------------------------------===*/

/* A loaded bundle with its parameters, gradients and optimizer state. */
typedef struct gpipe_session gpipe_session_t;

/* Reads the bundle file at `bundle_path`, checks it, and creates a session
 * that initializes every parameter from options->seed. `options` may be NULL
 * for the defaults; it is copied. On success *out_session is a new session
 * owned by the caller (release it with gpipe_session_destroy); on failure it
 * is NULL.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL path or out_session, an invalid
 * option), GPIPE_ERROR_IO (the file cannot be read), GPIPE_ERROR_INVALID_BUNDLE
 * (its text is not a valid bundle; the message names the file and the JSON
 * location), GPIPE_ERROR_OUT_OF_MEMORY.
 * Thread-safe: creations are independent. */
GPIPE_API gpipe_status_t gpipe_session_create_from_file(
    const char *bundle_path, const gpipe_session_options_t *options,
    gpipe_session_t **out_session);

/* As gpipe_session_create_from_file, from the `json_length` bytes of bundle
 * text at `json` (need not be NUL-terminated; copied). `source_name` labels
 * the text in error messages (e.g. the path it came from); NULL means
 * "<memory>". Errors as gpipe_session_create_from_file, without
 * GPIPE_ERROR_IO. Thread-safe. */
GPIPE_API gpipe_status_t gpipe_session_create_from_json(
    const char *json, size_t json_length, const char *source_name,
    const gpipe_session_options_t *options, gpipe_session_t **out_session);

/* Releases the session and everything it owns (its strings and info structs
 * become invalid). NULL is a no-op. Must not overlap any other call on the
 * session. */
GPIPE_API void gpipe_session_destroy(gpipe_session_t *session);

/* The message of the most recent call on `session` that took it non-const
 * (train, evaluate, set parameter): "" if that call returned GPIPE_OK or
 * none was made yet. Owned by the session, valid until its next non-const
 * call or its destruction. "" for a NULL session. Never NULL. Reads the
 * session: must not overlap a non-const call on it. */
GPIPE_API const char *gpipe_session_last_error(const gpipe_session_t *session);

/*===----------------------------------------------------------------------===*
 * Queries (const: may run concurrently with each other)
 *===----------------------------------------------------------------------===*/

typedef enum gpipe_element_type_e {
  GPIPE_ELEMENT_F32 = 0, /* float */
  GPIPE_ELEMENT_I32 = 1, /* int32_t */
  /* Not types: keep the enum 32-bit and any int32 value defined. */
  GPIPE_ELEMENT_ENUM_MIN = -0x7fffffff - 1,
  GPIPE_ELEMENT_ENUM_MAX = 0x7fffffff
} gpipe_element_type_t;

typedef struct gpipe_session_info_t {
  /* The bundle's model name; owned by the session. */
  const char *model;
  /* Rows of every training mini-batch (dimension 0 of each batched input). */
  int64_t batch_size;
  /* Pipeline devices K (= stages); one thread each during a step. */
  size_t device_count;
  /* Micro-batches M per mini-batch. */
  size_t microbatch_count;
  size_t input_count;
  size_t parameter_count;
} gpipe_session_info_t;

/* A model input, a parameter or the prediction. */
typedef struct gpipe_tensor_info_t {
  /* The input's or parameter's name; for the prediction the loss op,
   * "softmax_cross_entropy" (the prediction is the logits) or "mse_loss".
   * Owned by the session. */
  const char *name;
  gpipe_element_type_t type;
  /* Nonzero if dimension 0 is the batch (inputs and the prediction). */
  int batched;
  size_t rank;
  /* shape[0..rank); a batched tensor's shape[0] is its row count. */
  int64_t shape[GPIPE_MAX_RANK];
  /* The product of the shape. */
  size_t element_count;
} gpipe_tensor_info_t;

/* The session's model, batch size and counts.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session or out_info). */
GPIPE_API gpipe_status_t gpipe_session_query_info(
    const gpipe_session_t *session, gpipe_session_info_t *out_info);

/* Model input `index` (in [0, input_count), bundle order) at the full batch:
 * its shape[0] is the batch size.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, index out of range). */
GPIPE_API gpipe_status_t
gpipe_session_input_info(const gpipe_session_t *session, size_t index,
                         gpipe_tensor_info_t *out_info);

/* Parameter `index` (in [0, parameter_count), bundle order); always f32 and
 * not batched.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, index out of range). */
GPIPE_API gpipe_status_t
gpipe_session_parameter_info(const gpipe_session_t *session, size_t index,
                             gpipe_tensor_info_t *out_info);

/* The prediction gpipe_session_evaluate writes for `rows` rows (>= 1): f32,
 * shape[0] = rows; its element_count is the buffer size evaluate needs.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, rows < 1, a size that
 * overflows). */
GPIPE_API gpipe_status_t
gpipe_session_prediction_info(const gpipe_session_t *session, int64_t rows,
                              gpipe_tensor_info_t *out_info);

/* The most steps a session counts: steps done are in [0,
 * GPIPE_MAX_STEPS_DONE], so that the next step's number (steps done + 1,
 * which seeds dropout and Adam's bias correction) is an int64_t.
 * gpipe_session_set_steps_done and a checkpoint's step are refused above
 * it; a training step once the count has reached it fails with
 * GPIPE_ERROR_FAILED_PRECONDITION. */
#define GPIPE_MAX_STEPS_DONE (INT64_MAX - 1)

/* The number of successful training steps (the optimizer's step count).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t
gpipe_session_steps_done(const gpipe_session_t *session, int64_t *out_steps);

/* Per device, the high-water mark of the bytes its tensors held during the
 * last training step (by the executor's own accounting: parameters,
 * gradients, optimizer slots, kept and received activations, scratch);
 * before the first step, the resident bytes.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, device out of range). */
GPIPE_API gpipe_status_t gpipe_session_peak_memory_bytes(
    const gpipe_session_t *session, size_t device, int64_t *out_bytes);

/* The measured bubble fraction of the last training step: the share of
 * device time spent idle or waiting.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, or record_timeline is
 * off). */
GPIPE_API gpipe_status_t gpipe_session_bubble_fraction(
    const gpipe_session_t *session, double *out_fraction);

/* Writes the last training step's timeline as Chrome trace event JSON
 * (open it in Perfetto or chrome://tracing; one row per device) to `path`.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, or record_timeline is
 * off), GPIPE_ERROR_IO (the file cannot be written). */
GPIPE_API gpipe_status_t
gpipe_session_write_trace(const gpipe_session_t *session, const char *path);

/*===----------------------------------------------------------------------===*
 * Training and evaluation
 *===----------------------------------------------------------------------===*/

/* One model input of a batch: `element_count` elements of `type` at `data`,
 * row-major in the input's shape (gpipe_session_input_info) with the batch's
 * row count as dimension 0. Read during the call only. */
typedef struct gpipe_input_t {
  const char *name;
  gpipe_element_type_t type;
  const void *data; /* const float * or const int32_t *, per `type` */
  size_t element_count;
} gpipe_input_t;

/* One training step on a mini-batch of batch_size rows: `inputs` holds each
 * model input exactly once, in any order. Runs every device's program on its
 * own thread (joined before the return) and applies one optimizer step;
 * *out_loss is the mini-batch loss (the row-weighted mean of the
 * micro-batch losses). The input buffers are copied; the caller keeps them.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, a missing or
 * duplicated input, a wrong element type or count), GPIPE_ERROR_NOT_FOUND (an
 * input name the model does not have), GPIPE_ERROR_RUNTIME (a device failed;
 * parameters and optimizer state are unchanged), GPIPE_ERROR_NON_FINITE (the
 * guard, options->check_finite: a nan or infinite loss or gradient, the
 * parameters unchanged; or a parameter the update made non-finite, the
 * update applied), GPIPE_ERROR_OUT_OF_MEMORY. A failed step does not count
 * in gpipe_session_steps_done.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_train_step(gpipe_session_t *session,
                                                  const gpipe_input_t *inputs,
                                                  size_t input_count,
                                                  double *out_loss);

/* The global gradient norm of the last training step (train_step or a step
 * of the training loops): the L2 norm of every parameter's gradient across
 * all the devices, before clipping. Steps measure it when the session clips
 * or guards (options->clip_grad_norm > 0 or check_finite, the default).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer),
 * GPIPE_ERROR_FAILED_PRECONDITION (no step has run, the session neither
 * clips nor guards, or the last step failed before it measured the norm).
 * Reads the session: must not overlap a non-const call on it. */
GPIPE_API gpipe_status_t
gpipe_session_gradient_norm(const gpipe_session_t *session, double *out_norm);

/* Forward only (no dropout, no gradients, no parameter change) on `rows`
 * rows (any number >= 1; each input has `rows` as dimension 0). Writes the
 * prediction (the loss op's first operand, gpipe_session_prediction_info) to
 * out_prediction, which holds `prediction_capacity` floats, and the loss to
 * *out_loss. out_prediction may be NULL when prediction_capacity is 0: then
 * only the loss is computed.
 * Errors: as gpipe_session_train_step, plus GPIPE_ERROR_BUFFER_TOO_SMALL
 * (prediction_capacity < the prediction's element count; checked before any
 * work). Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_evaluate(
    gpipe_session_t *session, int64_t rows, const gpipe_input_t *inputs,
    size_t input_count, size_t prediction_capacity, float *out_prediction,
    double *out_loss);

/*===----------------------------------------------------------------------===*
 * Training loops (the library's, shared with gpipe-run)
 *===----------------------------------------------------------------------===*/

/* What a loop reports after each epoch (images) or evaluation (text). Fields
 * that do not apply are NaN. */
typedef struct gpipe_training_report_t {
  uint32_t epoch;       /* images: 1-based; text: 0 */
  int64_t step;         /* steps done: in the epoch (images), the run (text) */
  double train_loss;    /* mean since the last report */
  double test_accuracy; /* images: share of the test set classified right */
  double validation_loss; /* text: nats per character */
  double samples_per_second;
} gpipe_training_report_t;

/* Receives each report; `user_data` is the loop's argument. May be NULL. */
typedef void (*gpipe_report_fn)(const gpipe_training_report_t *report,
                                void *user_data);

/* The loops' options grow at their end only, as gpipe_session_options_t:
 * struct_size (set by the _init function) says how much of the struct the
 * caller knows, the fields beyond it take their defaults, and a struct_size
 * below the _MIN_SIZE (the first layout, API version 3) or above the
 * library's sizeof is refused with GPIPE_ERROR_INVALID_ARGUMENT. */
typedef struct gpipe_image_training_options_t {
  /* sizeof(gpipe_image_training_options_t) of the caller's header; set by
   * gpipe_image_training_options_init. */
  size_t struct_size;
  uint32_t epochs;             /* >= 1. Default 10. */
  int64_t max_steps_per_epoch; /* 0: the whole training set. Default 0. */
  float learning_rate;         /* > 0 and finite. Default 1e-3. */
  int cosine_schedule;   /* Nonzero: decay to 0 over the run. Default 1. */
  uint64_t shuffle_seed; /* Default 1. */

  /* Added after the first layout (GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE). */

  /* Steps of linear warmup to learning_rate before the schedule (as
   * gpipe-run's --warmup-steps); >= 0 and fewer than the run's steps.
   * Default 0. */
  int64_t warmup_steps;
} gpipe_image_training_options_t;

/* The struct_size of the first layout the library accepts (API version 3:
 * struct_size through shuffle_seed). */
#define GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE                                  \
  (offsetof(gpipe_image_training_options_t, shuffle_seed) + sizeof(uint64_t))

/* Sets struct_size to sizeof(gpipe_image_training_options_t) and every
 * other field to its default. NULL is a no-op. Thread-safe. */
GPIPE_API void
gpipe_image_training_options_init(gpipe_image_training_options_t *out_options);

/* Trains an image classifier: epochs over the shuffled training set of the
 * IDX files in `dataset_dir` (Fashion-MNIST's names: train-images-idx3-ubyte,
 * ... , raw or .gz), the test accuracy after each. The model must have one
 * f32 input of height x width values per example and one i32 label input.
 * *out_test_accuracy (may be NULL) gets the last epoch's accuracy.
 * `options` may be NULL for the defaults.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session or directory, a bad
 * option or struct_size, a model whose inputs do not fit the images; the
 * message says what was expected and found), GPIPE_ERROR_IO (a file missing
 * or unreadable), GPIPE_ERROR_RUNTIME (a failed step),
 * GPIPE_ERROR_NON_FINITE (the guard stopped a step), GPIPE_ERROR_OUT_OF_MEMORY.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_train_images(
    gpipe_session_t *session, const char *dataset_dir,
    const gpipe_image_training_options_t *options, gpipe_report_fn report,
    void *user_data, double *out_test_accuracy);

typedef struct gpipe_text_training_options_t {
  /* sizeof(gpipe_text_training_options_t) of the caller's header; set by
   * gpipe_text_training_options_init. */
  size_t struct_size;
  int64_t steps;         /* >= 1. Default 1000. */
  uint32_t eval_every;   /* Steps between evaluations; 0: at the end only.
                            Default 100. */
  uint32_t eval_batches; /* Validation batches per evaluation; 0: all.
                            Default 8. */
  float learning_rate;   /* > 0 and finite. Default 1e-3. */
  int cosine_schedule;   /* Default 1. */
  uint64_t seed;         /* The windows drawn. Default 1. */

  /* Added after the first layout (GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE). */
  int64_t warmup_steps; /* As the image options'. Default 0. */
} gpipe_text_training_options_t;

/* The struct_size of the first layout the library accepts (API version 3:
 * struct_size through seed). */
#define GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE                                   \
  (offsetof(gpipe_text_training_options_t, seed) + sizeof(uint64_t))

/* Sets struct_size to sizeof(gpipe_text_training_options_t) and every other
 * field to its default. NULL is a no-op. Thread-safe. */
GPIPE_API void
gpipe_text_training_options_init(gpipe_text_training_options_t *out_options);

/* Trains a character language model on the text at `corpus_path` (a file or
 * a directory of files; every tenth document is validation): steps of random
 * windows, the validation loss before the first step, every eval_every steps
 * and after the last. The model must have i32 inputs ids, positions and
 * targets of one shape [batch, seq]. *out_validation_loss (may be NULL) gets
 * the last validation loss, in nats per character. `options` may be
 * NULL for the defaults.
 * Errors: as gpipe_session_train_images. */
GPIPE_API gpipe_status_t gpipe_session_train_text(
    gpipe_session_t *session, const char *corpus_path,
    const gpipe_text_training_options_t *options, gpipe_report_fn report,
    void *user_data, double *out_validation_loss);

/*===----------------------------------------------------------------------===*
 * Parameters
 *===----------------------------------------------------------------------===*/

/* The element count of parameter `name`.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer), GPIPE_ERROR_NOT_FOUND
 * (no such parameter). */
GPIPE_API gpipe_status_t
gpipe_session_parameter_size(const gpipe_session_t *session, const char *name,
                             size_t *out_element_count);

/* Copies parameter `name` (row-major, gpipe_session_parameter_info's shape)
 * into out_values, which holds `capacity` floats.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer), GPIPE_ERROR_NOT_FOUND,
 * GPIPE_ERROR_BUFFER_TOO_SMALL (capacity < the parameter's element count). */
GPIPE_API gpipe_status_t
gpipe_session_get_parameter(const gpipe_session_t *session, const char *name,
                            size_t capacity, float *out_values);

/* As gpipe_session_get_parameter, for the gradient of parameter `name`
 * accumulated over the micro-batches of the last training step (zeros before
 * the first). */
GPIPE_API gpipe_status_t
gpipe_session_get_gradient(const gpipe_session_t *session, const char *name,
                           size_t capacity, float *out_values);

/* Overwrites parameter `name` with the `element_count` floats at `values`
 * (e.g. from a checkpoint); the optimizer state is kept.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, element_count not the
 * parameter's, a non-finite value), GPIPE_ERROR_NOT_FOUND.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_parameter(gpipe_session_t *session,
                                                     const char *name,
                                                     const float *values,
                                                     size_t element_count);

/*===----------------------------------------------------------------------===*
 * Training state: learning rate, optimizer state, step count
 *===----------------------------------------------------------------------===*/

/* Sets the learning rate of the next gpipe_session_train_step calls (e.g. a
 * schedule the application computes per step); the optimizer state is kept.
 * The library's training loops (gpipe_session_train_images / _text) use
 * their own options' rate and schedule, and restore this one when they
 * return. On an error the rate is unchanged. At rate 0 a step leaves the
 * parameters as they are, except under RMSProp, whose momentum term keeps
 * moving them by what earlier steps accumulated (TensorFlow's rule).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session; learning_rate not
 * finite or < 0). Non-const: must not overlap any other call on the
 * session. */
GPIPE_API gpipe_status_t
gpipe_session_set_learning_rate(gpipe_session_t *session, float learning_rate);

/* The learning rate of the next training step: options->learning_rate until
 * gpipe_session_set_learning_rate changes it.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t gpipe_session_get_learning_rate(
    const gpipe_session_t *session, float *out_learning_rate);

/* The number of optimizer state tensors ("slots") kept per parameter, each
 * of the parameter's shape: SGD 0, momentum 1 (slot 0: the velocity),
 * RMSProp 2 (0: the mean square ms, 1: the momentum mom), Adam 2 (0: m,
 * 1: v); Optimizers.h gives the update rules. A checkpoint saves slot k of
 * parameter p as "optimizer.<k>/<p>".
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer). */
GPIPE_API gpipe_status_t gpipe_session_optimizer_slot_count(
    const gpipe_session_t *session, uint32_t *out_slot_count);

/* The element count of optimizer state `slot` of parameter `name` (the
 * parameter's).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, slot >= the slot
 * count), GPIPE_ERROR_NOT_FOUND (no such parameter). */
GPIPE_API gpipe_status_t gpipe_session_optimizer_state_size(
    const gpipe_session_t *session, const char *name, uint32_t slot,
    size_t *out_element_count);

/* Copies optimizer state `slot` of parameter `name` (row-major in the
 * parameter's shape; zeros before the first step) into out_values, which
 * holds `capacity` floats.
 * Errors: as gpipe_session_optimizer_state_size, plus
 * GPIPE_ERROR_BUFFER_TOO_SMALL (capacity < the element count). */
GPIPE_API gpipe_status_t gpipe_session_get_optimizer_state(
    const gpipe_session_t *session, const char *name, uint32_t slot,
    size_t capacity, float *out_values);

/* Overwrites optimizer state `slot` of parameter `name` with the
 * `element_count` floats at `values`. With gpipe_session_set_parameter and
 * gpipe_session_set_steps_done this moves a run into another session: the
 * next steps are bitwise those the first session would take.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL pointer, slot out of range,
 * element_count not the parameter's, a non-finite value, a negative value
 * in a mean of squared gradients: RMSProp's slot 0, Adam's slot 1),
 * GPIPE_ERROR_NOT_FOUND. On an error nothing changes.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_optimizer_state(
    gpipe_session_t *session, const char *name, uint32_t slot,
    const float *values, size_t element_count);

/* Sets the number of steps done (gpipe_session_steps_done): the next
 * training step is step `steps` + 1, which fixes Adam's bias correction and
 * the dropout masks.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL session, steps < 0 or
 * > GPIPE_MAX_STEPS_DONE).
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_set_steps_done(gpipe_session_t *session,
                                                      int64_t steps);

/*===----------------------------------------------------------------------===*
 * Checkpoints (docs/Checkpoints.md)
 *===----------------------------------------------------------------------===*/

/* Saves the session's parameters, optimizer state and steps done as the
 * checkpoint `<dir>/step-<N>` (created with its parents; safetensors plus a
 * JSON state), atomically: a process killed at any point leaves the previous
 * checkpoint loadable. Then `<dir>/latest` names it, and all but the newest
 * `keep` checkpoints are deleted (0: none).
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL or empty pointer), GPIPE_ERROR_IO
 * (the directory cannot be created or written), GPIPE_ERROR_RUNTIME (a
 * device failed). Non-const: must not overlap any other call on the
 * session. */
GPIPE_API gpipe_status_t gpipe_session_save_checkpoint(gpipe_session_t *session,
                                                       const char *dir,
                                                       uint32_t keep);

/* Loads a checkpoint into the session: `path` is a checkpoint directory or a
 * save directory whose `latest` names one; it may come from a run on any
 * number of pipeline devices or another device kind. Every parameter and
 * optimizer state tensor must be there with the model's shape, each passes
 * its checksum, and the optimizer must be the session's; then the next step
 * is the checkpoint's step + 1. Nothing changes on an error.
 * Errors: GPIPE_ERROR_INVALID_ARGUMENT (NULL or empty pointer; a shape, the
 * optimizer or a checksum that does not match: the message names the tensor
 * and both shapes), GPIPE_ERROR_NOT_FOUND (a tensor the model needs is
 * missing), GPIPE_ERROR_IO (the files cannot be read), GPIPE_ERROR_RUNTIME.
 * Non-const: must not overlap any other call on the session. */
GPIPE_API gpipe_status_t gpipe_session_load_checkpoint(gpipe_session_t *session,
                                                       const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_GPIPE_RUNTIME_H */
