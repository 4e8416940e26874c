#include "runtime/tie_book.h"

#include "core/error.h"

namespace zs {

void TieBook::connect(std::span<ParamGroup> groups, DeviceOps& ops, MemoryTracker* tracker) {
  ops_ = &ops;
  const size_t U = groups.size();
  of_borrower_.assign(U, {});
  of_owner_.assign(U, {});
  current_.assign(U, {});
  grads_.clear();
  for (size_t k = 0; k < ties_.size(); ++k) {
    const TiedParam& t = ties_[k];
    ParamGroup& b = groups[static_cast<size_t>(t.unit)];
    const size_t slot = of_borrower_[static_cast<size_t>(t.unit)].size();
    ZS_ASSERT(b.tied_spec_index(slot) == t.spec);
    of_borrower_[static_cast<size_t>(t.unit)].push_back(k);
    grads_.emplace_back();
    if (!t.trainable) continue;
    of_owner_[static_cast<size_t>(t.owner_unit)].push_back(k);
    grads_.back() = Buffer(static_cast<size_t>(4 * t.numel), MemCategory::kCommBuffers, tracker,
                           &ops.allocator());
    b.set_tied_grad(slot, grads_.back().as<float>());
  }
}

void TieBook::acquired(ParamGroup& g, std::span<const ParamView> views) {
  const size_t u = static_cast<size_t>(g.index());
  current_[u] = views;
  const std::vector<size_t>& mine = of_borrower_[u];
  for (size_t t = 0; t < mine.size(); ++t) {
    const TiedParam& tie = ties_[mine[t]];
    g.set_tied_view(t, current_[static_cast<size_t>(tie.owner_unit)][tie.owner_spec]);
  }
}

void TieBook::begin_backward() {
  for (Buffer& b : grads_) {
    if (!b.empty()) ops_->zero(b.data(), b.size());
  }
}

void TieBook::seed_owner(const ParamGroup& owner, float* scratch) {
  for (size_t k : of_owner_[static_cast<size_t>(owner.index())]) {
    const TiedParam& t = ties_[k];
    size_t p = 0;
    while (owner.spec_index(p) != t.owner_spec) ++p;
    float* dst = scratch + owner.layout().params[p].offset;
    ops_->accumulate(dst, DType::kF32, grads_[k].data(), DType::kF32, t.numel);
  }
}

}  // namespace zs
