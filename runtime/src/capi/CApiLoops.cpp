//===- CApiLoops.cpp - The C API: the library's training loops ------------===//
//
// gpipe_session_train_images and gpipe_session_train_text run the loops of
// Training.h, the ones gpipe-run runs, on the session's engine, and turn
// their reports into gpipe_training_report_t for the caller's callback.
//
//===----------------------------------------------------------------------===//

#include "capi/CApiSupport.h"

#include "gpipe/runtime/train/Training.h"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <string>

using namespace gpipe::runtime::capi;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Hands each epoch or evaluation to the C callback and keeps the last.
class CallbackObserver final : public rt::TrainingObserver {
public:
  CallbackObserver(gpipe_session_t &session, gpipe_report_fn report,
                   void *userData)
      : session(session), report(report), userData(userData) {}

  // Each step's gradient norm, for gpipe_session_gradient_norm.
  void onStep(const rt::StepProgress &progress) override {
    session.stepRan = true;
    session.gradientNorm = progress.gradientNorm;
  }

  void onEpoch(const rt::EpochReport &epoch) override {
    gpipe_training_report_t r = blank();
    r.epoch = epoch.epoch;
    r.step = epoch.steps;
    r.train_loss = epoch.trainLoss;
    r.test_accuracy = epoch.testAccuracy;
    r.samples_per_second = epoch.samplesPerSecond;
    deliver(r);
  }
  void onEvaluation(const rt::TextEvaluation &evaluation) override {
    gpipe_training_report_t r = blank();
    r.step = evaluation.step;
    r.train_loss = evaluation.trainLoss.value_or(kNaN);
    r.validation_loss = evaluation.validationLoss;
    r.samples_per_second = evaluation.charsPerSecond;
    deliver(r);
  }

  gpipe_training_report_t last = blank();

private:
  static gpipe_training_report_t blank() {
    return {0, 0, kNaN, kNaN, kNaN, kNaN};
  }
  void deliver(const gpipe_training_report_t &r) {
    last = r;
    if (report)
      report(&r, userData);
  }
  gpipe_session_t &session;
  gpipe_report_fn report;
  void *userData;
};

rt::LearningRateSchedule scheduleOf(int cosine) {
  return cosine ? rt::LearningRateSchedule::Cosine
                : rt::LearningRateSchedule::Constant;
}

/// The caller's loop options (or the defaults for null) as this library's
/// struct, `init` filling the defaults: "" or what is wrong with
/// struct_size. Both loops' structs grew warmup_steps after their first
/// layout.
template <class T>
std::string readOptions(const T *options, T &o, void (*init)(T *),
                        size_t minSize, const char *initName) {
  init(&o);
  if (!options)
    return {};
  const size_t size = options->struct_size;
  std::string error = checkStructSize(size, minSize, sizeof(T), initName);
  if (!error.empty())
    return error;
  const T defaults = o;
  std::memcpy(static_cast<void *>(&o), options, size);
  o.struct_size = sizeof(T);
  keepDefaultBeyond(size, offsetof(T, warmup_steps), o.warmup_steps,
                    defaults.warmup_steps);
  return {};
}

std::string readOptions(const gpipe_image_training_options_t *options,
                        gpipe_image_training_options_t &o) {
  return readOptions(options, o, gpipe_image_training_options_init,
                     GPIPE_IMAGE_TRAINING_OPTIONS_MIN_SIZE,
                     "gpipe_image_training_options_init");
}

std::string readOptions(const gpipe_text_training_options_t *options,
                        gpipe_text_training_options_t &o) {
  return readOptions(options, o, gpipe_text_training_options_init,
                     GPIPE_TEXT_TRAINING_OPTIONS_MIN_SIZE,
                     "gpipe_text_training_options_init");
}

/// After a loop: a step that failed leaves its norm unknown; a loop refused
/// before its first step (options, data) leaves the session as it was.
gpipe_status_t finishLoop(gpipe_session_t *session, const rt::Status &status,
                          const char *function) {
  // The loop schedules its own rate; train_step goes on with the session's.
  session->executor->setLearningRate(session->learningRate);
  if (status.ok())
    return GPIPE_OK;
  if (status.code() == rt::StatusCode::DeviceFailure ||
      status.code() == rt::StatusCode::NonFinite ||
      status.code() == rt::StatusCode::DeadlineExceeded)
    session->gradientNorm.reset();
  return fail(session, status, function);
}

} // namespace

void gpipe_image_training_options_init(
    gpipe_image_training_options_t *out_options) {
  if (!out_options)
    return;
  rt::ImageTrainingOptions defaults;
  *out_options = gpipe_image_training_options_t{};
  out_options->struct_size = sizeof(gpipe_image_training_options_t);
  out_options->epochs = defaults.epochs;
  out_options->max_steps_per_epoch = defaults.maxStepsPerEpoch;
  out_options->learning_rate = defaults.learningRate;
  out_options->cosine_schedule =
      defaults.schedule == rt::LearningRateSchedule::Cosine;
  out_options->shuffle_seed = defaults.shuffleSeed;
  out_options->warmup_steps = defaults.warmupSteps;
}

void gpipe_text_training_options_init(
    gpipe_text_training_options_t *out_options) {
  if (!out_options)
    return;
  rt::TextTrainingOptions defaults;
  *out_options = gpipe_text_training_options_t{};
  out_options->struct_size = sizeof(gpipe_text_training_options_t);
  out_options->steps = defaults.steps;
  out_options->eval_every = defaults.evalEvery;
  out_options->eval_batches = defaults.evalBatches;
  out_options->learning_rate = defaults.learningRate;
  out_options->cosine_schedule =
      defaults.schedule == rt::LearningRateSchedule::Cosine;
  out_options->seed = defaults.seed;
  out_options->warmup_steps = defaults.warmupSteps;
}

gpipe_status_t
gpipe_session_train_images(gpipe_session_t *session, const char *dataset_dir,
                           const gpipe_image_training_options_t *options,
                           gpipe_report_fn report, void *user_data,
                           double *out_test_accuracy) {
  const char *function = "gpipe_session_train_images";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!dataset_dir)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "dataset_dir is null");
    gpipe_image_training_options_t o;
    if (std::string error = readOptions(options, o); !error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function, error);
    rt::ImageTrainingOptions loop;
    loop.epochs = o.epochs;
    loop.maxStepsPerEpoch = o.max_steps_per_epoch;
    loop.learningRate = o.learning_rate;
    loop.schedule = scheduleOf(o.cosine_schedule);
    loop.shuffleSeed = o.shuffle_seed;
    loop.warmupSteps = o.warmup_steps;
    if (rt::Status status = rt::checkOptions(loop); !status.ok())
      return fail(session, status, function);
    rt::StatusOr<rt::ImageDataset> train =
        rt::loadFashionMnist(dataset_dir, true);
    if (!train.ok())
      return fail(session, train.status(), function);
    rt::StatusOr<rt::ImageDataset> test =
        rt::loadFashionMnist(dataset_dir, false);
    if (!test.ok())
      return fail(session, test.status(), function);
    rt::Engine &engine = *session->executor;
    rt::StatusOr<rt::ImageInputs> inputs =
        rt::bindImageInputs(engine.bundle(), train->height * train->width);
    if (!inputs.ok())
      return fail(session, inputs.status(), function);
    CallbackObserver observer(*session, report, user_data);
    std::vector<int64_t> peak;
    rt::Status status = rt::trainImageClassifier(engine, *train, *test, *inputs,
                                                 loop, observer, peak);
    if (gpipe_status_t failed = finishLoop(session, status, function))
      return failed;
    if (out_test_accuracy)
      *out_test_accuracy = observer.last.test_accuracy;
    return succeed(session);
  });
}

gpipe_status_t
gpipe_session_train_text(gpipe_session_t *session, const char *corpus_path,
                         const gpipe_text_training_options_t *options,
                         gpipe_report_fn report, void *user_data,
                         double *out_validation_loss) {
  const char *function = "gpipe_session_train_text";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!corpus_path)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "corpus_path is null");
    gpipe_text_training_options_t o;
    if (std::string error = readOptions(options, o); !error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function, error);
    rt::TextTrainingOptions loop;
    loop.steps = o.steps;
    loop.evalEvery = o.eval_every;
    loop.evalBatches = o.eval_batches;
    loop.learningRate = o.learning_rate;
    loop.schedule = scheduleOf(o.cosine_schedule);
    loop.seed = o.seed;
    loop.warmupSteps = o.warmup_steps;
    if (rt::Status status = rt::checkOptions(loop); !status.ok())
      return fail(session, status, function);
    rt::Engine &engine = *session->executor;
    rt::StatusOr<int64_t> seq = rt::characterModelWindow(engine.bundle());
    if (!seq.ok())
      return fail(session, seq.status(), function);
    rt::StatusOr<rt::TextCorpus> corpus = rt::loadTextCorpus(corpus_path);
    if (!corpus.ok())
      return fail(session, corpus.status(), function);
    std::string error = rt::checkTextFitsWindow(
        corpus->validation, *seq,
        "the validation text of '" + std::string(corpus_path) + "'");
    if (!error.empty())
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function, error);
    CallbackObserver observer(*session, report, user_data);
    rt::TextRunSummary summary;
    rt::Status status =
        rt::trainCharacterModel(engine, *corpus, *seq, loop, observer, summary);
    if (gpipe_status_t failed = finishLoop(session, status, function))
      return failed;
    if (out_validation_loss)
      *out_validation_loss = summary.validationLoss;
    return succeed(session);
  });
}
