// Used only while examples/train_gpt/checkpointing.cc is absent: checkpoint flags are accepted
// but any use of them is refused with a clear error.
#include "checkpointing.h"

#include "runtime/core/error.h"

namespace zs::train {

namespace po = boost::program_options;

void add_checkpoint_flags(po::options_description& d, CheckpointFlags& f) {
  d.add_options()("save-dir", po::value(&f.save_dir), "checkpoint directory (not built)")(
      "resume", po::bool_switch(&f.resume), "resume (not built)")(
      "resume-from", po::value(&f.resume_from), "resume from (not built)")(
      "export-safetensors", po::value(&f.export_safetensors), "export (not built)");
}
bool resume_if_asked(Engine&, Communicator&, const CheckpointFlags& f, const std::string&,
                     TrainerState&) {
  ZS_CHECK(!f.resume && f.resume_from.empty() && f.init_from.empty(), ErrorCode::kUnsupported,
           "this train_gpt was built without checkpoint support");
  return false;
}
void save_if_due(Engine&, Communicator&, const CheckpointFlags& f, const std::string&,
                 const TrainerState&, bool) {
  ZS_CHECK(f.save_dir.empty(), ErrorCode::kUnsupported,
           "this train_gpt was built without checkpoint support");
}
void export_if_asked(Engine&, Communicator&, const CheckpointFlags& f) {
  ZS_CHECK(f.export_safetensors.empty(), ErrorCode::kUnsupported,
           "this train_gpt was built without checkpoint support");
}

}  // namespace zs::train
