#include "runtime/param_group.h"

#include "collectives/flight_recorder.h"
#include "core/error.h"

namespace zs {

namespace {

const void* at(const void* p, int64_t elems, DType dt) {
  return static_cast<const char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}
void* at(void* p, int64_t elems, DType dt) {
  return static_cast<char*>(p) + elems * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace

ParamGroup::ParamGroup(int index, std::string name, std::vector<ParamSpec> specs,
                       GroupLayout layout, const ShardingPolicy& policy, DType param_dtype,
                       DType grad_dtype, int rank, Buffer params, Buffer grads, Communicator& comm,
                       DeviceOps& ops)
    : index_(index),
      name_(std::move(name)),
      specs_(std::move(specs)),
      layout_(std::move(layout)),
      policy_(policy),
      P_(param_dtype),
      G_(grad_dtype),
      rank_(rank),
      params_(std::move(params)),
      grads_(std::move(grads)),
      comm_(comm),
      ops_(ops),
      param_state_(policy.shard_params ? ParamState::kSharded : ParamState::kGathered) {
  for (size_t p = 0; p < specs_.size(); ++p) {
    const ParamSlot& s = layout_.params[p];
    const void* data = policy_.shard_params ? nullptr : at(params_.data(), s.offset, P_);
    resident_views_.push_back({data, P_, s.numel, &specs_[p]});
  }
  slot_views_ = resident_views_;
  tag_gather_ = name_ + " gather";
  tag_reduce_ = name_ + " reduce";
  tag_grad_gather_ = name_ + " grad gather";
  tag_param_gather_ = name_ + " param gather";
}

std::span<const ParamView> ParamGroup::views() const {
  ZS_ASSERT(!policy_.shard_params);
  return resident_views_;
}

void ParamGroup::start_gather(int slot, void* slot_data) {
  ZS_ASSERT(policy_.shard_params && param_state_ == ParamState::kSharded);
  for (size_t p = 0; p < slot_views_.size(); ++p) {
    slot_views_[p].data = at(slot_data, layout_.params[p].offset, P_);
  }
  set_flight_tag(tag_gather_.c_str());
  gather_work_ = comm_.start_all_gather(params_.data(), slot_data,
                                        static_cast<size_t>(layout_.shard_numel), P_);
  slot_ = slot;
  param_state_ = ParamState::kGathering;
}

std::span<const ParamView> ParamGroup::wait_gather() {
  ZS_ASSERT(param_state_ == ParamState::kGathering);
  gather_work_->wait();
  gather_work_.reset();
  param_state_ = ParamState::kGathered;
  return slot_views_;
}

int ParamGroup::release() {
  ZS_ASSERT(policy_.shard_params && param_state_ == ParamState::kGathered);
  const int s = slot_;
  slot_ = -1;
  param_state_ = ParamState::kSharded;
  return s;
}

void* ParamGroup::param_at(int64_t e) {
  if (policy_.shard_params) {
    e -= layout_.shard_begin(rank_);
    ZS_ASSERT(e >= 0 && e <= layout_.shard_numel);
  }
  return at(params_.data(), e, P_);
}

WorkHandle ParamGroup::start_gather_updated_params() {
  if (!policy_.gather_updated_params()) return nullptr;
  set_flight_tag(tag_param_gather_.c_str());
  return comm_.start_all_gather(param_at(layout_.shard_begin(rank_)), params_.data(),
                                static_cast<size_t>(layout_.shard_numel), P_);
}

void ParamGroup::begin_step() {
  ZS_ASSERT(grad_state_ != GradState::kReducing);
  grad_state_ = GradState::kClear;
}

void ParamGroup::start_reduce(const ReduceLane& lane, int micro, int micro_batches) {
  ZS_ASSERT(grad_state_ == (micro == 0 ? GradState::kClear : GradState::kAccumulating));
  const int64_t full = layout_.padded_numel;
  const size_t shard = static_cast<size_t>(layout_.shard_numel);
  const bool last = micro == micro_batches - 1;
  if (!policy_.shard_grads) {
    // A full gradient buffer: sum the micro-batches locally, reduce once, in place.
    if (micro == 0) {
      ops_.convert(lane.scratch, DType::kF32, grads_.data(), G_, full);
    } else {
      ops_.accumulate(grads_.data(), G_, lane.scratch, DType::kF32, full);
    }
    grad_state_ = GradState::kAccumulating;
    if (!last) return;
    set_flight_tag(tag_reduce_.c_str());
    reduce_work_ =
        comm_.start_reduce_scatter(grads_.data(), at(grads_.data(), layout_.shard_begin(rank_), G_),
                                   shard, G_, ReduceOp::kSum);
    pending_recv_ = nullptr;
  } else {
    const void* send = lane.scratch;
    if (G_ != DType::kF32) {
      ops_.convert(lane.scratch, DType::kF32, lane.send, G_, full);
      send = lane.send;
    }
    // The first micro-batch's reduction lands in the shard; later ones are added to it.
    void* recv = micro == 0 ? grads_.data() : lane.recv;
    ZS_ASSERT(recv != nullptr);
    set_flight_tag(tag_reduce_.c_str());
    reduce_work_ = comm_.start_reduce_scatter(send, recv, shard, G_, ReduceOp::kSum);
    pending_recv_ = micro == 0 ? nullptr : lane.recv;
  }
  pending_last_ = last;
  grad_state_ = GradState::kReducing;
}

bool ParamGroup::finish_reduce() {
  ZS_ASSERT(grad_state_ == GradState::kReducing);
  reduce_work_->wait();
  reduce_work_.reset();
  if (pending_recv_) ops_.accumulate(grads_.data(), G_, pending_recv_, G_, layout_.shard_numel);
  pending_recv_ = nullptr;
  grad_state_ = pending_last_ ? GradState::kReduced : GradState::kAccumulating;
  return pending_last_;
}

WorkHandle ParamGroup::start_gather_reduced_grads() {
  if (!policy_.gather_reduced_grads()) return nullptr;
  ZS_ASSERT(grad_state_ == GradState::kReduced);
  set_flight_tag(tag_grad_gather_.c_str());
  return comm_.start_all_gather(grad_shard(), grads_.data(),
                                static_cast<size_t>(layout_.shard_numel), G_);
}

const void* ParamGroup::grad_shard() const {
  return policy_.shard_grads ? grads_.data() : at(grads_.data(), layout_.shard_begin(rank_), G_);
}

const void* ParamGroup::update_grad() const {
  // Stage 0 updates the whole group from the gathered gradient; stage 1 its region of the full
  // buffer; stages 2-3 the shard.
  return policy_.shard_optimizer ? grad_shard() : grads_.data();
}

}  // namespace zs
