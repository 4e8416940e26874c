#include "runtime/unit.h"

#include "core/error.h"

namespace zs {

void GradViews::frozen_grad_requested(size_t i) const {
  fail(ErrorCode::kInvalidArgument,
       "backward asked for the gradient of parameter {}, which is frozen (ParamSpec::trainable = "
       "false): check GradViews::wanted() and skip its gradient",
       i);
}

}  // namespace zs
