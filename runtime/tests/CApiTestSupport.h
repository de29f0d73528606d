/*===- CApiTestSupport.h - What the C-written API tests share ----*- C -*-===*
 *
 * The tests written in C (CApi*Test.c) report failures as a message and
 * feed sessions deterministic batches; both live here once.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_TESTS_CAPITESTSUPPORT_H
#define GPIPE_RUNTIME_TESTS_CAPITESTSUPPORT_H

#include "gpipe/runtime/gpipe_runtime.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* printf into one static buffer (each test thread runs one check at a time);
 * returns it. */
const char *capi_failure(const char *format, ...);

/* Every model input at the full batch, filled from `seed`: f32 inputs in
 * [-1, 1], i32 inputs (the labels) in [0, classes). */
typedef struct capi_batch_t {
  gpipe_input_t inputs[8];
  size_t count;
} capi_batch_t;

/* 1 on success, 0 when the session cannot be queried or has more than 8
 * inputs. Free with capi_free_batch. */
int capi_make_batch(const gpipe_session_t *session, uint64_t seed,
                    capi_batch_t *batch);
void capi_free_batch(capi_batch_t *batch);

#ifdef __cplusplus
}
#endif

#endif /* GPIPE_RUNTIME_TESTS_CAPITESTSUPPORT_H */
