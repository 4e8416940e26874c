// zs_run's choice of the next world after a failure (docs/reliability.md, "Automatic restart"): the
// hosts a job runs on, the slots that survive, and the world size a policy picks. Pure functions,
// tested without launching anything.
#pragma once

#include <string>
#include <vector>

namespace zs::run {

// One --hosts entry: a host name as mpirun reaches it and the ranks it may hold.
struct HostSlots {
  std::string host;
  int slots = 1;
};

// --world-policy: how many ranks a relaunch gets from the slots that survive.
//   kPow2  the largest power of two <= min(slots, np): what world-invariant runs and the usual
//          --global-micro-batches divide (default)
//   kSame  np, or give up when fewer slots survive
//   kAny   min(slots, np)
enum class WorldPolicy { kPow2, kSame, kAny };

// "pow2", "same" or "any"; throws zs::Error(kInvalidArgument) naming the value otherwise.
WorldPolicy parse_world_policy(const std::string& text);
const char* world_policy_name(WorldPolicy p);

// "h1:2,h2:2" (a missing ":S" is one slot). Throws zs::Error(kInvalidArgument) on an empty name,
// a slot count that is not a positive integer, or a host named twice.
std::vector<HostSlots> parse_hosts(const std::string& text);
// The inverse: mpirun's --host argument.
std::string hosts_text(const std::vector<HostSlots>& hosts);
int total_slots(const std::vector<HostSlots>& hosts);

// The world size of the relaunch of an `np`-rank job when `slots` slots survive: never more than
// np (a restart does not grow the job); 0 when the policy cannot continue (no slot, or kSame with
// fewer than np).
int next_world(WorldPolicy policy, int np, int slots);

}  // namespace zs::run
