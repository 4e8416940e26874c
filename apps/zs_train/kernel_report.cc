#include "kernel_report.h"

#include <fmt/format.h>

#include "collectives/reduce_kernels.h"
#include "core/convert.h"
#include "core/cpu_features.h"
#include "core/settings.h"
#include "nn/gemm.h"
#include "nn/int8_linear.h"
#include "optim/cpu_adam.h"

namespace zs::train {

nlohmann::json kernel_report(DType compute_dtype, const std::string& device) {
  const std::string level(simd_level_name(active_simd_level()));
  // fp16 compute runs its products in fp32 (the GPT converts fp16 weights into fp32 scratch).
  const DType mm = compute_dtype == DType::kBF16 ? DType::kBF16 : DType::kF32;
  const std::string gemm = device == "cpu" ? nn::gemm_path(mm).name : "cublaslt (" + device + ")";
  const std::string cd(dtype_name(compute_dtype));
  // The caps as Settings reads them (core/settings.h, the one reader of the environment).
  const Settings env = Settings::from_environment();
  const std::string isa_cap(simd_level_name(env.force_scalar ? SimdLevel::kScalar : env.max_isa));
  nlohmann::json j = {
      {"cpu", cpu_model_name()},
      {"features", cpu_features_string()},
      {"isa", level},
      {"isa_cap", isa_cap},
      {"onednn_isa_cap", env.onednn_max_cpu_isa.empty() ? "none" : env.onednn_max_cpu_isa},
      {"gemm", gemm},
      {"gemm_dtype", std::string(dtype_name(mm))},
      {"elementwise", level},
      {"cpu_adam", optim::cpu_adam_isa()},
      {"reductions", std::string(reduce_path_name())},
      {"int8_gemm", device == "cpu" ? nn::int8_gemm_description() : "none (" + device + ")"},
  };
  if (compute_dtype != DType::kF32) {
    j["conversions"] =
        fmt::format("fp32->{} {}, {}->fp32 {}", cd, convert_path_name(DType::kF32, compute_dtype),
                    cd, convert_path_name(compute_dtype, DType::kF32));
  } else {
    j["conversions"] = "none (fp32 compute)";
  }
  return j;
}

std::string kernel_report_text(const nlohmann::json& r) {
  auto s = [&](const char* k) { return r.at(k).get<std::string>(); };
  return fmt::format(
      "cpu: {} | features: {} | our kernels at {} (ZS_MAX_ISA {}), oneDNN cap "
      "ONEDNN_MAX_CPU_ISA {}\n"
      "kernel paths: gemm {} {} | conversions {} | elementwise {} | cpu adam {} | "
      "reductions {} | {}\n",
      s("cpu"), s("features"), s("isa"), s("isa_cap"), s("onednn_isa_cap"), s("gemm_dtype"),
      s("gemm"), s("conversions"), s("elementwise"), s("cpu_adam"), s("reductions"),
      r.value("int8_gemm", std::string("int8 gemm: ?")));
}

}  // namespace zs::train
