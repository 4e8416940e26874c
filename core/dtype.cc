#include "core/dtype.h"

#include <string>

#include "core/error.h"

namespace zs {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kCommunication:
      return "communication error";
    case ErrorCode::kOutOfMemory:
      return "out of memory";
    case ErrorCode::kCorruptData:
      return "corrupt data";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kInternal:
      return "internal error";
    case ErrorCode::kNonFinite:
      return "non-finite values";
  }
  return "unknown error";
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kI8:
      return 1;
    case DType::kU8:
      return 1;
    case DType::kF64:
      return 8;
  }
  fail(ErrorCode::kInvalidArgument, "dtype_size: invalid dtype value {}", static_cast<int>(dt));
}

std::string_view dtype_name(DType dt) {
  switch (dt) {
    case DType::kF32:
      return "fp32";
    case DType::kF16:
      return "fp16";
    case DType::kBF16:
      return "bf16";
    case DType::kI8:
      return "int8";
    case DType::kU8:
      return "uint8";
    case DType::kF64:
      return "fp64";
  }
  return "invalid";
}

DType parse_dtype(std::string_view name) {
  if (name == "fp32" || name == "float32") return DType::kF32;
  if (name == "fp16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "int8") return DType::kI8;
  if (name == "uint8") return DType::kU8;
  if (name == "fp64" || name == "float64") return DType::kF64;
  fail(ErrorCode::kInvalidArgument,
       "unknown dtype '{}' (expected one of fp32, bf16, fp16, int8, uint8, fp64)", name);
}

bool dtype_is_float(DType dt) {
  return dt == DType::kF32 || dt == DType::kF16 || dt == DType::kBF16 || dt == DType::kF64;
}

}  // namespace zs
