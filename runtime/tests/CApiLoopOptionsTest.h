/*===- CApiLoopOptionsTest.h - The loops' options structs, in C ----*- C -*-===*
 *
 * Checks written in C against gpipe_runtime.h (CApiLoopOptionsTest.c) of
 * gpipe_image_training_options_t's and gpipe_text_training_options_t's
 * struct_size; each returns NULL when it holds, else a message valid until
 * the next check.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_RUNTIME_TESTS_CAPILOOPOPTIONSTEST_H
#define GPIPE_RUNTIME_TESTS_CAPILOOPOPTIONSTEST_H

#include "gpipe/runtime/gpipe_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Both _init functions stamp struct_size with the header's sizeof and set
 * the documented defaults; NULL is a no-op. */
const char *capi_loop_options_check_init(void);

/* A struct_size of 0, below the first layout's or above the library's is
 * refused by gpipe_session_train_images (with the image set in
 * `images_dir`) and gpipe_session_train_text (with the corpus at
 * `corpus_path`) with the accepted range, before anything is read. */
const char *capi_loop_options_check_sizes(gpipe_session_t *image_session,
                                          const char *images_dir,
                                          gpipe_session_t *text_session,
                                          const char *corpus_path);

/* Image options of the first layout (struct_size
 * GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE), followed in memory by bytes that
 * would be a negative warmup_steps if read, train one epoch of 2 steps;
 * gpipe_session_gradient_norm then has the last step's norm (> 0). In the
 * current layout warmup_steps is read: 2 of the run's 2 steps is refused. */
const char *capi_loop_options_check_image_layouts(gpipe_session_t *session,
                                                  const char *images_dir);

/* As capi_loop_options_check_image_layouts for the text loop: 3 steps on
 * the corpus at `corpus_path`, then warmup_steps 3 of 3 refused. */
const char *capi_loop_options_check_text_layouts(gpipe_session_t *session,
                                                 const char *corpus_path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPIPE_RUNTIME_TESTS_CAPILOOPOPTIONSTEST_H */
