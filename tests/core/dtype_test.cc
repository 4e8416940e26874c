#include "core/dtype.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace zs {
namespace {

TEST(DType, NamesSizesAndParse) {
  struct Row {
    DType dt;
    const char* name;
    size_t size;
    bool is_float;
  };
  const Row rows[] = {{DType::kF32, "fp32", 4, true},  {DType::kF16, "fp16", 2, true},
                      {DType::kBF16, "bf16", 2, true}, {DType::kI8, "int8", 1, false},
                      {DType::kU8, "uint8", 1, false}, {DType::kF64, "fp64", 8, true}};
  for (const Row& r : rows) {
    EXPECT_EQ(dtype_name(r.dt), r.name);
    EXPECT_EQ(dtype_size(r.dt), r.size);
    EXPECT_EQ(dtype_is_float(r.dt), r.is_float);
    EXPECT_EQ(parse_dtype(r.name), r.dt);
  }
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float16"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("float64"), DType::kF64);
}

TEST(DType, ParseErrorNamesTheText) {
  for (const char* bad : {"fp8", "FP32", "", "bf16 "}) {
    try {
      parse_dtype(bad);
      FAIL() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + std::string(bad) + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("bf16"), std::string::npos) << msg;  // lists the accepted names
    }
  }
}

TEST(DType, InvalidValueThrows) {
  EXPECT_THROW(dtype_size(static_cast<DType>(200)), Error);
  EXPECT_EQ(dtype_name(static_cast<DType>(200)), "invalid");
}

}  // namespace
}  // namespace zs
