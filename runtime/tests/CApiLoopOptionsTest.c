/*===- CApiLoopOptionsTest.c - The loops' options structs, from C ----------===*
 *
 * gpipe_image_training_options_t and gpipe_text_training_options_t start
 * with struct_size, as gpipe_session_options_t: a C program built against an
 * older header passes its smaller struct and still runs, the fields it lacks
 * taking their defaults. CApiLoopOptionsTest.cpp runs these checks under
 * GoogleTest on the sessions and data it makes.
 *
 *===----------------------------------------------------------------------===*/

#include "CApiLoopOptionsTest.h"
#include "CApiTestSupport.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *capi_loop_options_check_init(void) {
  gpipe_image_training_options_t image;
  memset(&image, 0xAB, sizeof(image));
  gpipe_image_training_options_init(&image);
  if (image.struct_size != sizeof(image) || image.epochs != 10 ||
      image.max_steps_per_epoch != 0 || image.learning_rate != 1e-3f ||
      image.cosine_schedule != 1 || image.shuffle_seed != 1 ||
      image.warmup_steps != 0)
    return capi_failure(
        "image defaults: struct_size %zu (expected %zu), epochs "
        "%u, max_steps_per_epoch %lld, learning_rate %g, "
        "cosine_schedule %d, shuffle_seed %llu, warmup_steps %lld",
        image.struct_size, sizeof(image), image.epochs,
        (long long)image.max_steps_per_epoch, image.learning_rate,
        image.cosine_schedule, (unsigned long long)image.shuffle_seed,
        (long long)image.warmup_steps);
  gpipe_text_training_options_t text;
  memset(&text, 0xAB, sizeof(text));
  gpipe_text_training_options_init(&text);
  if (text.struct_size != sizeof(text) || text.steps != 1000 ||
      text.eval_every != 100 || text.eval_batches != 8 ||
      text.learning_rate != 1e-3f || text.cosine_schedule != 1 ||
      text.seed != 1 || text.warmup_steps != 0)
    return capi_failure(
        "text defaults: struct_size %zu (expected %zu), steps "
        "%lld, eval_every %u, eval_batches %u, learning_rate %g, "
        "cosine_schedule %d, seed %llu, warmup_steps %lld",
        text.struct_size, sizeof(text), (long long)text.steps, text.eval_every,
        text.eval_batches, text.learning_rate, text.cosine_schedule,
        (unsigned long long)text.seed, (long long)text.warmup_steps);
  gpipe_image_training_options_init(NULL);
  gpipe_text_training_options_init(NULL);
  return NULL;
}

/* The message of a refused struct_size `size`. */
static void size_message(char *out, size_t capacity, const char *function,
                         size_t size, size_t first, size_t own,
                         const char *init) {
  int n = snprintf(out, capacity,
                   "%s: options->struct_size: expected %zu to %zu, got %zu",
                   function, first, own, size);
  if (n < 0 || (size_t)n >= capacity)
    return;
  if (size == 0)
    snprintf(out + n, capacity - (size_t)n, " (initialize the options with %s)",
             init);
  else if (size > own)
    snprintf(out + n, capacity - (size_t)n,
             " (options of a newer gpipe_runtime.h than this library's, %s)",
             gpipe_runtime_version());
}

const char *capi_loop_options_check_sizes(gpipe_session_t *image_session,
                                          const char *images_dir,
                                          gpipe_session_t *text_session,
                                          const char *corpus_path) {
  const size_t image_first = GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE;
  const size_t text_first = GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE;
  const size_t image_sizes[] = {0, 8, image_first - 1,
                                sizeof(gpipe_image_training_options_t) + 8};
  const size_t text_sizes[] = {0, 8, text_first - 1,
                               sizeof(gpipe_text_training_options_t) + 8};
  char expected[512];
  for (size_t i = 0; i < 4; ++i) {
    gpipe_image_training_options_t image;
    gpipe_image_training_options_init(&image);
    image.struct_size = image_sizes[i];
    size_message(expected, sizeof(expected), "gpipe_session_train_images",
                 image.struct_size, image_first, sizeof(image),
                 "gpipe_image_training_options_init");
    gpipe_status_t status = gpipe_session_train_images(
        image_session, images_dir, &image, NULL, NULL, NULL);
    if (status != GPIPE_ERROR_INVALID_ARGUMENT ||
        strcmp(gpipe_session_last_error(image_session), expected) != 0)
      return capi_failure("image struct_size %zu: %s: '%s', expected '%s'",
                          image.struct_size, gpipe_status_string(status),
                          gpipe_session_last_error(image_session), expected);

    gpipe_text_training_options_t text;
    gpipe_text_training_options_init(&text);
    text.struct_size = text_sizes[i];
    size_message(expected, sizeof(expected), "gpipe_session_train_text",
                 text.struct_size, text_first, sizeof(text),
                 "gpipe_text_training_options_init");
    status = gpipe_session_train_text(text_session, corpus_path, &text, NULL,
                                      NULL, NULL);
    if (status != GPIPE_ERROR_INVALID_ARGUMENT ||
        strcmp(gpipe_session_last_error(text_session), expected) != 0)
      return capi_failure("text struct_size %zu: %s: '%s', expected '%s'",
                          text.struct_size, gpipe_status_string(status),
                          gpipe_session_last_error(text_session), expected);
  }
  return NULL;
}

/* gpipe_session_gradient_norm after a loop: the last step's, positive. */
static const char *check_norm(const gpipe_session_t *session) {
  double norm = 0;
  if (gpipe_session_gradient_norm(session, &norm) != GPIPE_OK)
    return capi_failure("gradient_norm after the loop: %s", gpipe_last_error());
  if (!(norm > 0))
    return capi_failure("gradient_norm after the loop: %g", norm);
  return NULL;
}

const char *capi_loop_options_check_image_layouts(gpipe_session_t *session,
                                                  const char *images_dir) {
  union {
    gpipe_image_training_options_t options;
    unsigned char bytes[sizeof(gpipe_image_training_options_t)];
  } memory;
  memset(memory.bytes, 0xFF, sizeof(memory.bytes));
  gpipe_image_training_options_t current;
  gpipe_image_training_options_init(&current);
  current.epochs = 1;
  current.max_steps_per_epoch = 2;
  current.learning_rate = 0.01f;
  memcpy(memory.bytes, &current, GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE);
  memory.options.struct_size = GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE;
  if (gpipe_session_train_images(session, images_dir, &memory.options, NULL,
                                 NULL, NULL) != GPIPE_OK)
    return capi_failure("first layout: %s", gpipe_session_last_error(session));
  const char *error = check_norm(session);
  if (error)
    return error;
  current.warmup_steps = 2;
  const char *refused = "gpipe_session_train_images: expected fewer warmup "
                        "steps than the run's 2 steps, got 2";
  if (gpipe_session_train_images(session, images_dir, &current, NULL, NULL,
                                 NULL) != GPIPE_ERROR_INVALID_ARGUMENT ||
      strcmp(gpipe_session_last_error(session), refused) != 0)
    return capi_failure("warmup_steps 2 of 2: '%s'",
                        gpipe_session_last_error(session));
  return NULL;
}

const char *capi_loop_options_check_text_layouts(gpipe_session_t *session,
                                                 const char *corpus_path) {
  union {
    gpipe_text_training_options_t options;
    unsigned char bytes[sizeof(gpipe_text_training_options_t)];
  } memory;
  memset(memory.bytes, 0xFF, sizeof(memory.bytes));
  gpipe_text_training_options_t current;
  gpipe_text_training_options_init(&current);
  current.steps = 3;
  current.eval_every = 0;
  current.eval_batches = 1;
  current.learning_rate = 0.01f;
  memcpy(memory.bytes, &current, GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE);
  memory.options.struct_size = GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE;
  if (gpipe_session_train_text(session, corpus_path, &memory.options, NULL,
                               NULL, NULL) != GPIPE_OK)
    return capi_failure("first layout: %s", gpipe_session_last_error(session));
  const char *error = check_norm(session);
  if (error)
    return error;
  current.warmup_steps = 3;
  const char *refused = "gpipe_session_train_text: expected fewer warmup "
                        "steps than the run's 3 steps, got 3";
  if (gpipe_session_train_text(session, corpus_path, &current, NULL, NULL,
                               NULL) != GPIPE_ERROR_INVALID_ARGUMENT ||
      strcmp(gpipe_session_last_error(session), refused) != 0)
    return capi_failure("warmup_steps 3 of 3: '%s'",
                        gpipe_session_last_error(session));
  return NULL;
}
