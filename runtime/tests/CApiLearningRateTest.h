/*===- CApiLearningRateTest.h - The learning rate checks, in C -----*- C -*-===*
 *
 * Checks written in C against gpipe_runtime.h (CApiLearningRateTest.c); each
 * returns NULL when it holds, else a message valid until the next check.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_TESTS_CAPILEARNINGRATETEST_H
#define GPIPE_RUNTIME_TESTS_CAPILEARNINGRATETEST_H

#include "gpipe/runtime/gpipe_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* After a step at the default rate (if `warm_up`), a step at learning rate
 * 0 leaves every parameter bitwise unchanged, though its gradient is not
 * zero. */
const char *capi_lr_check_zero_rate(const char *json, size_t length,
                                    gpipe_optimizer_t optimizer, int warm_up);

/* get_learning_rate starts at the options' rate and returns what
 * set_learning_rate set; the next SGD step is p - lr g, bitwise, from the
 * gradient get_gradient reports. */
const char *capi_lr_check_sgd_update(const char *json, size_t length);

/* Negative, infinite and NaN rates are refused with their message and leave
 * the rate as it was; NULL pointers are refused. */
const char *capi_lr_check_errors(const char *json, size_t length);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_TESTS_CAPILEARNINGRATETEST_H */
