/*===- gpipe_runtime_base.h - Export macro, versions, status ------*- C -*-===*\
 *
 * GPIPE_API (the shared library's exports), the API and library versions,
 * GPIPE_MAX_RANK, gpipe_status_t, gpipe_status_string and gpipe_last_error.
 * Every other part includes this one first.
 *
 * Part of the C API; applications include gpipe/runtime/gpipe_runtime.h,
 * which includes every part in order and states the conventions (status,
 * ownership, thread safety) that the comments here rely on.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_BASE_H
#define GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_BASE_H

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

/*===----------------------------------------------------------------------===*
 * Versions
 *===----------------------------------------------------------------------===*/

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_CAPI_GPIPE_RUNTIME_BASE_H */
