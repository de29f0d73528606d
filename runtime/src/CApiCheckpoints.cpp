//===- CApiCheckpoints.cpp - gpipe_session_*_checkpoint -------------------===//
//
// The C API's checkpoints: Checkpoint.h's save and load on the session's
// engine, with its errors mapped to gpipe_status_t.
//
//===----------------------------------------------------------------------===//

#include "CApiSupport.h"

#include "gpipe/runtime/Checkpoint.h"

using namespace gpipe::runtime::capi;

gpipe_status_t gpipe_session_save_checkpoint(gpipe_session_t *session,
                                             const char *dir, uint32_t keep) {
  const char *function = "gpipe_session_save_checkpoint";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!dir || !*dir)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "dir is null or empty");
    rt::StatusOr<std::string> saved =
        rt::saveCheckpoint(*session->executor, dir, "{}", keep);
    return saved.ok() ? succeed(session)
                      : fail(session, saved.status(), function);
  });
}

gpipe_status_t gpipe_session_load_checkpoint(gpipe_session_t *session,
                                             const char *path) {
  const char *function = "gpipe_session_load_checkpoint";
  return guarded(session, function, [&]() -> gpipe_status_t {
    if (!session)
      return fail(nullptr, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "session is null");
    if (!path || !*path)
      return fail(session, GPIPE_ERROR_INVALID_ARGUMENT, function,
                  "path is null or empty");
    rt::Status loaded = rt::loadCheckpoint(*session->executor, path);
    return loaded.ok() ? succeed(session) : fail(session, loaded, function);
  });
}
