#include "world.h"

#include <algorithm>
#include <charconv>

#include "core/error.h"

namespace zs::run {

WorldPolicy parse_world_policy(const std::string& text) {
  if (text == "pow2") return WorldPolicy::kPow2;
  if (text == "same") return WorldPolicy::kSame;
  if (text == "any") return WorldPolicy::kAny;
  fail(ErrorCode::kInvalidArgument, "--world-policy {}: pow2, same or any expected", text);
}

const char* world_policy_name(WorldPolicy p) {
  switch (p) {
    case WorldPolicy::kPow2:
      return "pow2";
    case WorldPolicy::kSame:
      return "same";
    case WorldPolicy::kAny:
      return "any";
  }
  return "?";
}

std::vector<HostSlots> parse_hosts(const std::string& text) {
  std::vector<HostSlots> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, end - at);
    const size_t colon = item.rfind(':');
    HostSlots h;
    h.host = item.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string s = item.substr(colon + 1);
      const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), h.slots);
      ZS_CHECK(ec == std::errc() && p == s.data() + s.size() && h.slots > 0,
               ErrorCode::kInvalidArgument,
               "--hosts {}: '{}' is not a positive slot count (HOST:SLOTS,...)", text, s);
    }
    ZS_CHECK(!h.host.empty(), ErrorCode::kInvalidArgument,
             "--hosts {}: an empty host name (HOST:SLOTS,...)", text);
    for (const HostSlots& o : out)
      ZS_CHECK(o.host != h.host, ErrorCode::kInvalidArgument, "--hosts {}: {} is named twice", text,
               h.host);
    out.push_back(h);
    at = end + 1;
  }
  return out;
}

std::string hosts_text(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const HostSlots& h : hosts)
    out += (out.empty() ? "" : ",") + h.host + ":" + std::to_string(h.slots);
  return out;
}

int total_slots(const std::vector<HostSlots>& hosts) {
  int n = 0;
  for (const HostSlots& h : hosts) n += h.slots;
  return n;
}

int next_world(WorldPolicy policy, int np, int slots) {
  const int fit = std::min(np, slots);
  if (fit <= 0) return 0;
  switch (policy) {
    case WorldPolicy::kSame:
      return slots >= np ? np : 0;
    case WorldPolicy::kAny:
      return fit;
    case WorldPolicy::kPow2: {
      int p = 1;
      while (p * 2 <= fit) p *= 2;
      return p;
    }
  }
  return 0;
}

}  // namespace zs::run
