// MLA decode (576 / 512), bf16; built whenever sm_90a is.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::sm90 {
static_assert(MlaTraits<__nv_bfloat16>::kSmemBytes == kMlaSmemBytes, "api.h's shared memory figure is stale");
template <>
cudaError_t run_mla<DType::kBFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return launch_mla<MlaTraits<__nv_bfloat16>>(params, stream);
}
}  // namespace flash::sm90
