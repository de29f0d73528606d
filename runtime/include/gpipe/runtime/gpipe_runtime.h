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
 * The declarations are in parts, one responsibility each, under
 * gpipe/runtime/capi/, included below in order: gpipe_runtime_base.h
 * (GPIPE_API, versions, status and errors), gpipe_runtime_options.h
 * (session options), gpipe_runtime_session.h (session lifetime and
 * queries), gpipe_runtime_training.h (training steps, evaluation and the
 * training loops) and gpipe_runtime_state.h (parameters, learning rate,
 * optimizer state, step count, checkpoints). Applications include this
 * header only.
 *
 * The header is C99; the library is C++17 and has no MLIR dependency.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_GPIPE_RUNTIME_H
#define GPIPE_RUNTIME_GPIPE_RUNTIME_H

/* The parts, in the order of their sections (gpipe_runtime_base.h first);
 * kept in this order, not sorted. */
/* clang-format off */
#include "gpipe/runtime/capi/gpipe_runtime_base.h"
#include "gpipe/runtime/capi/gpipe_runtime_options.h"
#include "gpipe/runtime/capi/gpipe_runtime_session.h"
#include "gpipe/runtime/capi/gpipe_runtime_training.h"
#include "gpipe/runtime/capi/gpipe_runtime_state.h"
/* clang-format on */

#endif /* GPIPE_RUNTIME_GPIPE_RUNTIME_H */
