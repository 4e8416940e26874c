// Typed errors for the whole runtime. The library throws zs::Error with a code and a message that
// names the operation, the rank and the sizes involved; programs in apps/ catch it, print one
// line and exit non-zero. Nothing in the library calls exit() or abort().
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace zs {

enum class ErrorCode {
  kInvalidArgument,  // bad flag, bad size, bad dtype, mismatched configuration
  kCommunication,    // a collective failed or ranks disagree
  kOutOfMemory,      // an allocation failed
  kCorruptData,      // checksum mismatch, truncated or malformed file
  kNotFound,         // a file or name that should exist does not
  kUnsupported,      // valid request the build or hardware cannot serve
  kInternal,         // a broken invariant: a bug in zeroshard
  kNonFinite,        // training produced NaN or inf where the run cannot absorb it
};

const char* error_code_name(ErrorCode code);

// Thread-safety: immutable after construction.
class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Throws zs::Error(code, fmt::format(format, args...)).
template <typename... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace zs

// ZS_CHECK(cond, code, "format {}", args...): throws zs::Error when cond is false.
#define ZS_CHECK(cond, code, ...)               \
  do {                                          \
    if (!(cond)) ::zs::fail(code, __VA_ARGS__); \
  } while (0)

// Internal invariant: failure is a bug in zeroshard, reported with file and line.
#define ZS_ASSERT(cond)                                                                   \
  do {                                                                                    \
    if (!(cond))                                                                          \
      ::zs::fail(::zs::ErrorCode::kInternal, "internal error: {} failed at {}:{}", #cond, \
                 __FILE__, __LINE__);                                                     \
  } while (0)
