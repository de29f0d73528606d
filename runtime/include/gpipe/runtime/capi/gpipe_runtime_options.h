/*===- gpipe_runtime_options.h - Session options ------------------*- C -*-===*\
 *
 * How a session trains: the optimizer and device enums and
 * gpipe_session_options_t, which grows at its end only (struct_size).
 *
 * Part of the C API; applications include gpipe/runtime/gpipe_runtime.h,
 * which includes every part in order and states the conventions (status,
 * ownership, thread safety) that the comments here rely on.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_OPTIONS_H
#define GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_OPTIONS_H

#include "gpipe/runtime/capi/gpipe_runtime_base.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_OPTIONS_H */
