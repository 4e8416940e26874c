// resolve_tied_params ([Note: tied parameters] in unit/unit.h): a valid tie resolves to its
// owner's index and trainability; each invalid one is refused with a message naming the unit,
// the parameter and what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "runtime/tied_params.h"

namespace zs {
namespace {

ParamSpec param(std::string name, std::vector<int64_t> shape, bool trainable = true) {
  ParamSpec p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.trainable = trainable;
  return p;
}

ParamSpec tied(std::string name, std::vector<int64_t> shape, int unit, std::string to) {
  ParamSpec p = param(std::move(name), std::move(shape));
  p.tied_to = {unit, std::move(to)};
  return p;
}

std::string name_of(size_t u) { return "u" + std::to_string(u); }

std::string error_of(const std::vector<std::vector<ParamSpec>>& specs) {
  try {
    resolve_tied_params(specs, name_of);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(TiedParams, ResolvesToTheOwner) {
  const std::vector<std::vector<ParamSpec>> specs = {
      {param("wte", {8, 4}, false), param("wpe", {2, 4})},
      {param("w", {4, 4})},
      {param("ln", {4}), tied("lm_head", {8, 4}, 0, "wte")}};
  const std::vector<TiedParam> t = resolve_tied_params(specs, name_of);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].unit, 2);
  EXPECT_EQ(t[0].spec, 1);
  EXPECT_EQ(t[0].owner_unit, 0);
  EXPECT_EQ(t[0].owner_spec, 0);
  EXPECT_EQ(t[0].numel, 32);
  EXPECT_FALSE(t[0].trainable);  // the owner's
  EXPECT_EQ(tied_owner_units(t), std::vector<int>{0});
}

TEST(TiedParams, RefusesBadTies) {
  const ParamSpec wte = param("wte", {8, 4});
  EXPECT_NE(
      error_of({{wte}, {tied("h", {8, 4}, 1, "wte")}})
          .find("unit 1 ('u1') parameter 'h' is tied to unit 1: a tied parameter's owner must be "
                "an earlier unit (0..0)"),
      std::string::npos);
  EXPECT_NE(error_of({{wte}, {tied("h", {8, 4}, 0, "wpe")}})
                .find("is tied to 'wpe' of unit 0 ('u0'), which has no parameter of that name"),
            std::string::npos);
  EXPECT_NE(error_of({{wte}, {tied("h", {4, 8}, 0, "wte")}})
                .find("has shape [4, 8] but is tied to 'wte' of unit 0, of shape [8, 4]"),
            std::string::npos);
  EXPECT_NE(error_of({{wte}, {tied("a", {8, 4}, 0, "wte")}, {tied("b", {8, 4}, 1, "a")}})
                .find("which is itself tied: tie to its owner"),
            std::string::npos);
  ParamSpec int8_owner = wte;
  int8_owner.accepts_int8 = true;
  EXPECT_NE(error_of({{int8_owner}, {tied("h", {8, 4}, 0, "wte")}})
                .find("which accepts int8 records: the borrower must too"),
            std::string::npos);
}

}  // namespace
}  // namespace zs
