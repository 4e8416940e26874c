#include "runtime/param_group.h"

#include <algorithm>
#include <cstring>

#include "collectives/flight_recorder.h"
#include "core/error.h"
#include "runtime/host_staging.h"

namespace zs {

namespace {

// The group's own parameters that are (not) trainable: tied ones are another group's.
std::vector<ParamSpec> trainable_only(const std::vector<ParamSpec>& specs, bool trainable) {
  std::vector<ParamSpec> out;
  for (const ParamSpec& s : specs) {
    if (!s.tied() && s.trainable == trainable) out.push_back(s);
  }
  return out;
}

std::vector<ParamSpec> tied_only(const std::vector<ParamSpec>& specs) {
  std::vector<ParamSpec> out;
  for (const ParamSpec& s : specs) {
    if (s.tied()) out.push_back(s);
  }
  return out;
}

// Points v at a frozen record that is not converted: its values in the compute dtype, or an int8
// record as the unit takes it ([Note: frozen parameters] in unit/unit.h): scales, then values.
void point_at_record(ParamView& v, const FrozenRecord& r, const void* record) {
  if (r.dtype != DType::kI8) {
    v.data = record;
    return;
  }
  v.dtype = DType::kI8;
  v.row_scales = static_cast<const float*>(record);
  v.data = record == nullptr ? nullptr : static_cast<const char*>(record) + 4 * r.rows;
}

}  // namespace

ParamGroup::ParamGroup(int index, std::string name, std::vector<ParamSpec> specs,
                       GroupLayout layout, const ShardingPolicy& policy, DType param_dtype,
                       DType grad_dtype, int rank, Buffer params, Buffer grads, Communicator& comm,
                       DeviceOps& ops)
    : ParamGroup(index, std::move(name), std::move(specs), std::move(layout), FrozenLayout{},
                 policy, param_dtype, grad_dtype, rank, std::move(params), std::move(grads),
                 Buffer(), nullptr, comm, ops) {}

ParamGroup::ParamGroup(int index, std::string name, std::vector<ParamSpec> unit_specs,
                       GroupLayout layout, FrozenLayout frozen, const ShardingPolicy& policy,
                       DType param_dtype, DType grad_dtype, int rank, Buffer params, Buffer grads,
                       Buffer frozen_store, void* convert, Communicator& comm, DeviceOps& ops,
                       GroupPaths paths)
    : index_(index),
      name_(std::move(name)),
      specs_(trainable_only(unit_specs, true)),
      frozen_specs_(trainable_only(unit_specs, false)),
      tied_specs_(tied_only(unit_specs)),
      tied_grads_(tied_specs_.size(), nullptr),
      layout_(std::move(layout)),
      frozen_(std::move(frozen)),
      gather_(std::move(paths.gather)),
      reduce_(std::move(paths.reduce)),
      policy_(policy),
      P_(param_dtype),
      G_(grad_dtype),
      rank_(rank),
      params_(std::move(params)),
      grads_(std::move(grads)),
      frozen_store_(std::move(frozen_store)),
      convert_(convert),
      comm_(comm),
      ops_(ops),
      param_state_(policy.shard_params ? ParamState::kSharded : ParamState::kGathered) {
  ZS_ASSERT(layout_.params.size() == specs_.size());
  ZS_ASSERT(frozen_.records.size() == frozen_specs_.size());
  for (size_t i = 0; i < unit_specs.size(); ++i) {
    if (unit_specs[i].tied()) {
      unit_order_.push_back(kTiedCode);
      tied_index_.push_back(static_cast<int>(i));
    } else if (unit_specs[i].trainable) {
      unit_order_.push_back(static_cast<int>(trainable_index_.size()));
      trainable_index_.push_back(static_cast<int>(i));
    } else {
      unit_order_.push_back(-static_cast<int>(frozen_index_.size()) - 1);
      frozen_index_.push_back(static_cast<int>(i));
    }
  }
  for (const FrozenRecord& r : frozen_.records) any_convert_ = any_convert_ || r.convert;
  ZS_ASSERT(!any_convert_ || convert_ != nullptr);
  if (!gather_ || !reduce_) {  // the plain paths of the policy's stage
    PathConfig c;
    c.stage = policy_.shard_params ? 3 : policy_.shard_grads ? 2 : policy_.shard_optimizer ? 1 : 0;
    c.param_dtype = P_;
    c.grad_dtype = G_;
    const PathComms comms{&comm_, nullptr, nullptr, nullptr};
    gather_ = make_gather_path(c, layout_, frozen_, rank_);
    gather_->connect(comms, Buffer());
    reduce_ = make_reduce_path(c, layout_, rank_);
    reduce_->connect(comms, grads_.data(), ops_, Buffer());
  }
  slot_layout_ = gather_->slot_layout();
  build_views();
  slot_views_ = resident_views_;
  tag_gather_ = name_ + " gather";
  tag_reduce_ = name_ + " reduce";
  tag_grad_gather_ = name_ + " grad gather";
  tag_param_gather_ = name_ + " param gather";
  tag_frozen_gather_ = name_ + " frozen gather";
}

// Views in the unit's order. A resident replica points into the group's own buffers; sharded
// parameters get their pointers when gathered (start_gather). Converted frozen parameters always
// live in the shared conversion buffer.
void ParamGroup::build_views() {
  resident_views_.clear();
  size_t tied = 0;
  for (int code : unit_order_) {
    ParamView v;
    v.dtype = P_;
    if (code == kTiedCode) {  // set_tied_view fills it
      v.spec = &tied_specs_[tied++];
      v.numel = v.spec->numel();
    } else if (code >= 0) {
      const ParamSlot& s = layout_.params[static_cast<size_t>(code)];
      v.numel = s.numel;
      v.spec = &specs_[static_cast<size_t>(code)];
      v.data = policy_.shard_params ? nullptr : element_at(params_.data(), s.offset, P_);
    } else {
      const size_t f = static_cast<size_t>(-code - 1);
      const FrozenRecord& r = frozen_.records[f];
      v.numel = r.numel;
      v.spec = &frozen_specs_[f];
      if (r.convert) {
        v.data = element_at(convert_, r.convert_offset, P_);
      } else {
        point_at_record(v, r,
                        policy_.shard_params
                            ? nullptr
                            : element_at(frozen_store_.data(), r.offset, DType::kU8));
      }
    }
    resident_views_.push_back(v);
  }
}

int64_t ParamGroup::slot_bytes() const { return slot_layout_.bytes; }

void ParamGroup::convert_frozen(const void* frozen_bytes) {
  if (!any_convert_) return;
  for (const FrozenRecord& r : frozen_.records) {
    if (!r.convert) continue;
    const void* src = element_at(frozen_bytes, r.offset, DType::kU8);
    void* dst = element_at(convert_, r.convert_offset, P_);
    if (ops_.host_accessible()) {
      convert_frozen_record(src, r, dst, P_);
    } else {
      ZS_ASSERT(r.dtype != DType::kI8);  // the engine refuses int8 storage on devices
      ops_.convert(src, r.dtype, dst, P_, r.numel);
    }
  }
}

void ParamGroup::set_tied_view(size_t t, const ParamView& v) {
  const size_t i = static_cast<size_t>(tied_index_.at(t));
  ParamView w = v;
  w.spec = &tied_specs_[t];
  resident_views_[i] = w;
  slot_views_[i] = w;
}

std::span<const ParamView> ParamGroup::views() {
  ZS_ASSERT(!policy_.shard_params);
  convert_frozen(frozen_store_.data());
  return resident_views_;
}

void ParamGroup::start_gather(int slot, void* slot_data) {
  ZS_ASSERT(policy_.shard_params && param_state_ == ParamState::kSharded);
  void* frozen_data = element_at(slot_data, slot_layout_.frozen_offset, DType::kU8);
  for (size_t i = 0; i < unit_order_.size(); ++i) {
    const int code = unit_order_[i];
    if (code == kTiedCode) continue;
    if (code >= 0) {
      slot_views_[i].data =
          element_at(slot_data, layout_.params[static_cast<size_t>(code)].offset, P_);
    } else {
      const FrozenRecord& r = frozen_.records[static_cast<size_t>(-code - 1)];
      if (!r.convert)
        point_at_record(slot_views_[i], r, element_at(frozen_data, r.offset, DType::kU8));
    }
  }
  if (layout_.padded_numel > 0) {
    set_flight_tag(tag_gather_.c_str());
    gather_work_ = gather_->start(params_.data(), slot_data);
  }
  if (!frozen_.empty()) {
    set_flight_tag(tag_frozen_gather_.c_str());
    frozen_work_ =
        comm_.start_all_gather(frozen_store_.data(), frozen_data,
                               static_cast<size_t>(frozen_.bytes.shard_numel), DType::kU8);
  }
  slot_ = slot;
  slot_data_ = slot_data;
  param_state_ = ParamState::kGathering;
}

std::span<const ParamView> ParamGroup::wait_gather() {
  ZS_ASSERT(param_state_ == ParamState::kGathering);
  if (gather_work_) {
    gather_work_->wait();
    gather_->finish(slot_data_);
  }
  gather_work_.reset();
  if (frozen_work_) {
    frozen_work_->wait();
    frozen_work_.reset();
    convert_frozen(element_at(slot_data_, slot_layout_.frozen_offset, DType::kU8));
  }
  param_state_ = ParamState::kGathered;
  return slot_views_;
}

std::span<const ParamView> ParamGroup::gathered_views() const {
  ZS_ASSERT(param_state_ == ParamState::kGathered && slot_ >= 0);
  return slot_views_;
}

void ParamGroup::set_frozen(size_t f, const float* values) {
  set_frozen(
      f,
      [values](int64_t first, int64_t n, float* out) {
        std::copy(values + first, values + first + n, out);
      },
      1);
}

// This rank's stored range of the padded byte group [lo, ...), and its overlap [b, e) with
// record r (b >= e: none).
void ParamGroup::stored_overlap(const FrozenRecord& r, int64_t& lo, int64_t& b, int64_t& e) const {
  lo = policy_.shard_params ? frozen_.bytes.shard_begin(rank_) : 0;
  const int64_t hi =
      lo + (policy_.shard_params ? frozen_.bytes.shard_numel : frozen_.bytes.padded_numel);
  b = std::max(lo, r.offset);
  e = std::min(hi, r.offset + r.bytes);
}

ElementRange ParamGroup::frozen_needs(size_t f) const {
  const FrozenRecord& r = frozen_.records.at(f);
  int64_t lo = 0, b = 0, e = 0;
  stored_overlap(r, lo, b, e);
  if (b >= e) return {};
  return frozen_elements_of_bytes(r, b - r.offset, e - r.offset);
}

void ParamGroup::set_frozen(size_t f, const FrozenValues& values, int threads) {
  const FrozenRecord& r = frozen_.records.at(f);
  int64_t lo = 0, b = 0, e = 0;
  stored_overlap(r, lo, b, e);
  if (b >= e) return;
  void* dst = element_at(frozen_store_.data(), b - lo, DType::kU8);
  if (ops_.host_accessible()) {
    encode_frozen_range(r, b - r.offset, e - r.offset, values, dst, threads);
  } else {
    std::vector<uint8_t> rec(static_cast<size_t>(e - b));
    encode_frozen_range(r, b - r.offset, e - r.offset, values, rec.data(), threads);
    ops_.copy_from_host(dst, rec.data(), rec.size());
    ops_.synchronize();  // `rec` goes away
  }
}

bool ParamGroup::exchanges_scales(const FrozenRecord& r) const {
  return r.dtype == DType::kI8 && r.rows > 0 && policy_.shard_params && comm_.size() > 1;
}

ElementRange ParamGroup::frozen_reads(size_t f) const {
  const FrozenRecord& r = frozen_.records.at(f);
  if (!exchanges_scales(r)) return frozen_needs(f);
  int64_t lo = 0, b = 0, e = 0;
  stored_overlap(r, lo, b, e);
  const int64_t vb = std::max(b, r.offset + 4 * r.rows);  // first value byte stored here
  if (vb >= e) return {};
  return frozen_elements_of_bytes(r, vb - r.offset, e - r.offset);  // the rows of those values
}

void ParamGroup::set_frozen_collective(size_t f, const FrozenValues& values, int threads) {
  const FrozenRecord& r = frozen_.records.at(f);
  if (!exchanges_scales(r)) {
    set_frozen(f, values, threads);
    return;
  }
  // Every rank takes part in the exchange, whatever it stores of this record.
  int64_t lo = 0, b = 0, e = 0;
  stored_overlap(r, lo, b, e);
  const int64_t values_begin = r.offset + 4 * r.rows;  // first value byte, in the group
  std::vector<float> scales(static_cast<size_t>(r.rows), 0.0f);
  std::vector<uint8_t> rec;
  void* dst = nullptr;
  if (b < e) {
    if (ops_.host_accessible()) {
      dst = element_at(frozen_store_.data(), b - lo, DType::kU8);
    } else {
      rec.resize(static_cast<size_t>(e - b));
      dst = rec.data();
    }
    const int64_t vb = std::max(b, values_begin);
    if (vb < e) {
      encode_int8_values(r, vb - r.offset, e - r.offset, values, static_cast<char*>(dst) + (vb - b),
                         scales.data(), threads);
    }
  }
  comm_.all_reduce(scales.data(), scales.data(), scales.size(), DType::kF32, ReduceOp::kMax);
  if (b >= e) return;
  if (b < values_begin) {
    std::memcpy(dst, reinterpret_cast<const char*>(scales.data()) + (b - r.offset),
                static_cast<size_t>(std::min(e, values_begin) - b));
  }
  if (!rec.empty()) {
    ops_.copy_from_host(element_at(frozen_store_.data(), b - lo, DType::kU8), rec.data(),
                        rec.size());
    ops_.synchronize();  // `rec` goes away
  }
}

std::vector<uint8_t> ParamGroup::gather_frozen_bytes(HostStaging& staging) {
  const size_t total = static_cast<size_t>(frozen_.bytes.padded_numel);
  std::vector<uint8_t> out(total);
  if (total == 0) return out;
  if (!policy_.shard_params) {
    ops_.copy_to_host(out.data(), frozen_store_.data(), total);
    return out;
  }
  staging.gather_to_host(comm_, frozen_store_.data(), out.data(),
                         static_cast<size_t>(frozen_.bytes.shard_numel), DType::kU8);
  return out;
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
  return element_at(params_.data(), e, P_);
}

WorkHandle ParamGroup::start_gather_updated_params() {
  if (!policy_.gather_updated_params() || layout_.padded_numel == 0) return nullptr;
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
  const bool last = micro == micro_batches - 1;
  if (layout_.padded_numel == 0) {  // only frozen parameters: nothing to reduce
    grad_state_ = last ? GradState::kReduced : GradState::kAccumulating;
    return;
  }
  set_flight_tag(tag_reduce_.c_str());
  reduce_work_ = reduce_->start(lane, micro, micro_batches);
  pending_last_ = last;
  grad_state_ = reduce_work_ ? GradState::kReducing : GradState::kAccumulating;
}

bool ParamGroup::finish_reduce() {
  ZS_ASSERT(grad_state_ == GradState::kReducing);
  reduce_work_->wait();
  reduce_work_.reset();
  reduce_->finish();
  grad_state_ = pending_last_ ? GradState::kReduced : GradState::kAccumulating;
  return pending_last_;
}

void ParamGroup::abandon_reduce() {
  if (grad_state_ != GradState::kReducing) return;
  reduce_work_.reset();  // waits
  grad_state_ = GradState::kClear;
}

WorkHandle ParamGroup::start_gather_reduced_grads() {
  if (!policy_.gather_reduced_grads()) return nullptr;
  ZS_ASSERT(grad_state_ == GradState::kReduced);
  if (layout_.padded_numel == 0) return nullptr;
  set_flight_tag(tag_grad_gather_.c_str());
  return comm_.start_all_gather(grad_shard(), grads_.data(),
                                static_cast<size_t>(layout_.shard_numel), G_);
}

const void* ParamGroup::grad_shard() const {
  return policy_.shard_grads ? grads_.data()
                             : element_at(grads_.data(), layout_.shard_begin(rank_), G_);
}

const void* ParamGroup::update_grad() const {
  // Stage 0 updates the whole group from the gathered gradient; stage 1 its region of the full
  // buffer; stages 2-3 the shard.
  return policy_.shard_optimizer ? grad_shard() : grads_.data();
}

}  // namespace zs
