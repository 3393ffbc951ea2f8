// A flash::Status with a printf-style message, for the references.
#pragma once

#include <cstdarg>
#include <cstdio>

#include "flash/flash.hpp"

namespace flash::ref {

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
inline Status make_error(StatusCode code, const char* format, ...) {
  Status status;
  status.code = code;
  va_list args;
  va_start(args, format);
  std::vsnprintf(status.message, sizeof(status.message), format, args);
  va_end(args);
  return status;
}

}  // namespace flash::ref
