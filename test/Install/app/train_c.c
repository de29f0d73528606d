/* Trains a compiled bundle for a few steps through the installed C API:
 * every input filled deterministically (floats in [-1, 1], integers 0 or 1,
 * valid ids and labels for any model), the same mini-batch each step, so
 * the loss must fall. Prints the runtime's version and the losses; exits 0
 * only if every step succeeded and the last loss is below the first. */
#include <gpipe/runtime/gpipe_runtime.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s BUNDLE\n", argv[0]);
    return 2;
  }
  printf("gpipe runtime %s (API %d)\n", gpipe_runtime_version(),
         GPIPE_RUNTIME_API_VERSION);
  gpipe_session_options_t options;
  gpipe_session_options_init(&options);
  options.learning_rate = 0.05f;
  gpipe_session_t *session = NULL;
  if (gpipe_session_create_from_file(argv[1], &options, &session) != GPIPE_OK) {
    fprintf(stderr, "%s\n", gpipe_last_error());
    return 1;
  }
  gpipe_session_info_t info;
  gpipe_session_query_info(session, &info);
  gpipe_input_t *inputs = calloc(info.input_count, sizeof(gpipe_input_t));
  for (size_t i = 0; i < info.input_count; ++i) {
    gpipe_tensor_info_t t;
    gpipe_session_input_info(session, i, &t);
    inputs[i].name = t.name;
    inputs[i].type = t.type;
    inputs[i].element_count = t.element_count;
    if (t.type == GPIPE_ELEMENT_F32) {
      float *data = malloc(t.element_count * sizeof(float));
      for (size_t e = 0; e < t.element_count; ++e)
        data[e] = (float)((e * 2654435761u) % 2001) / 1000.0f - 1.0f;
      inputs[i].data = data;
    } else {
      int32_t *data = malloc(t.element_count * sizeof(int32_t));
      for (size_t e = 0; e < t.element_count; ++e)
        data[e] = (int32_t)(e % 2);
      inputs[i].data = data;
    }
  }
  double first = 0, loss = 0;
  int status = 0;
  for (int step = 0; step < 5 && status == 0; ++step) {
    if (gpipe_session_train_step(session, inputs, info.input_count, &loss) !=
        GPIPE_OK) {
      fprintf(stderr, "%s\n", gpipe_last_error());
      status = 1;
      break;
    }
    printf("step %d: loss %.6f\n", step, loss);
    if (step == 0)
      first = loss;
  }
  if (status == 0 && !(isfinite(loss) && loss < first)) {
    fprintf(stderr, "the loss did not fall: %f -> %f\n", first, loss);
    status = 1;
  }
  for (size_t i = 0; i < info.input_count; ++i)
    free((void *)inputs[i].data);
  free(inputs);
  gpipe_session_destroy(session);
  return status;
}
