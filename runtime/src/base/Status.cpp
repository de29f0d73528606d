//===- Status.cpp - The one error type of the runtime ---------------------===//

#include "gpipe/runtime/base/Status.h"

using namespace gpipe::runtime;

const char *gpipe::runtime::statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "ok";
  case StatusCode::InvalidArgument:
    return "invalid argument";
  case StatusCode::NotFound:
    return "not found";
  case StatusCode::BufferTooSmall:
    return "buffer too small";
  case StatusCode::Io:
    return "input/output error";
  case StatusCode::InvalidBundle:
    return "invalid bundle";
  case StatusCode::DeviceFailure:
    return "device failure";
  case StatusCode::FailedPrecondition:
    return "failed precondition";
  case StatusCode::OutOfMemory:
    return "out of memory";
  case StatusCode::Unavailable:
    return "unavailable";
  case StatusCode::DeadlineExceeded:
    return "deadline exceeded";
  case StatusCode::Cancelled:
    return "cancelled";
  case StatusCode::NonFinite:
    return "non-finite value";
  }
  return "unknown";
}
