/*===- CApiTestSupport.c - What the C-written API tests share -------------===*/

#include "CApiTestSupport.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static char message[2048];

const char *capi_failure(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  return message;
}

int capi_make_batch(const gpipe_session_t *session, uint64_t seed,
                    capi_batch_t *batch) {
  gpipe_session_info_t info;
  gpipe_tensor_info_t prediction;
  if (gpipe_session_query_info(session, &info) != GPIPE_OK ||
      info.input_count > 8 ||
      gpipe_session_prediction_info(session, 1, &prediction) != GPIPE_OK)
    return 0;
  const int64_t classes = prediction.shape[prediction.rank - 1];
  uint64_t state = seed;
  batch->count = info.input_count;
  for (size_t i = 0; i < info.input_count; ++i) {
    gpipe_tensor_info_t input;
    gpipe_session_input_info(session, i, &input);
    gpipe_input_t *in = &batch->inputs[i];
    in->name = input.name;
    in->type = input.type;
    in->element_count = input.element_count;
    if (input.type == GPIPE_ELEMENT_F32) {
      float *data = malloc(input.element_count * sizeof(float));
      for (size_t e = 0; e < input.element_count; ++e) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        data[e] = (float)((state >> 33) % 2001) / 1000.0f - 1.0f;
      }
      in->data = data;
    } else {
      int32_t *data = malloc(input.element_count * sizeof(int32_t));
      for (size_t e = 0; e < input.element_count; ++e) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        data[e] = (int32_t)((state >> 33) % (uint64_t)classes);
      }
      in->data = data;
    }
  }
  return 1;
}

void capi_free_batch(capi_batch_t *batch) {
  for (size_t i = 0; i < batch->count; ++i)
    free((void *)(uintptr_t)batch->inputs[i].data);
  batch->count = 0;
}
