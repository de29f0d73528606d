// The C++ layer (gpipe/runtime/Runtime.hpp) of the installed package: trains
// a bundle as train_c.c does and checks the loss falls.
#include <gpipe/runtime/Runtime.hpp>

#include <cmath>
#include <cstdio>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s BUNDLE\n", argv[0]);
    return 2;
  }
  gpipe::Session::Options options = gpipe::Session::defaultOptions();
  options.learning_rate = 0.05f;
  gpipe::Result<gpipe::Session> session =
      gpipe::Session::open(argv[1], options);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().toString().c_str());
    return 1;
  }
  std::vector<std::vector<float>> floats;
  std::vector<std::vector<int32_t>> ints;
  std::vector<gpipe::Input> inputs;
  for (const gpipe::TensorInfo &t : session->inputs()) {
    if (t.type == GPIPE_ELEMENT_F32) {
      std::vector<float> data(t.elementCount);
      for (size_t e = 0; e < data.size(); ++e)
        data[e] = float((e * 2654435761u) % 2001) / 1000.0f - 1.0f;
      floats.push_back(std::move(data));
      inputs.push_back(gpipe::Input::f32(t.name, floats.back()));
    } else {
      std::vector<int32_t> data(t.elementCount);
      for (size_t e = 0; e < data.size(); ++e)
        data[e] = int32_t(e % 2);
      ints.push_back(std::move(data));
      inputs.push_back(gpipe::Input::i32(t.name, ints.back()));
    }
  }
  double first = 0, last = 0;
  for (int step = 0; step < 5; ++step) {
    gpipe::Result<double> loss = session->trainStep(inputs);
    if (!loss.ok()) {
      std::fprintf(stderr, "%s\n", loss.status().toString().c_str());
      return 1;
    }
    std::printf("step %d: loss %.6f\n", step, *loss);
    (step == 0 ? first : last) = *loss;
  }
  if (!(std::isfinite(last) && last < first)) {
    std::fprintf(stderr, "the loss did not fall: %f -> %f\n", first, last);
    return 1;
  }
  return 0;
}
