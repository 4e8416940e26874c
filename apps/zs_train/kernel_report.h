// What zs_train says about the machine before it trains and in its final JSON record: the CPU,
// its features, the ISA caps in force, and the path each kernel family takes (GEMM, conversions,
// the layers' row kernels, CPU Adam, the collectives' reductions).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"

namespace zs::train {

// Decides every path now (probing oneDNN), so a bad ZS_MAX_ISA or a missing kernel fails at
// start-up with zs::Error. `device`: "cpu" or "cuda" (the GEMM is then cuBLASLt's).
nlohmann::json kernel_report(DType compute_dtype, const std::string& device);
// Two lines, "cpu: ..." and "kernel paths: ...", each ending in '\n'.
std::string kernel_report_text(const nlohmann::json& report);

}  // namespace zs::train
