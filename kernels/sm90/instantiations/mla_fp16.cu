// MLA decode (576 / 512), fp16; built whenever sm_90a is.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::sm90 {
static_assert(MlaTraits<__half>::kSmemBytes == kMlaSmemBytes, "api.h's shared memory figure is stale");
template <>
cudaError_t run_mla<DType::kFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return launch_mla<MlaTraits<__half>>(params, stream);
}
}  // namespace flash::sm90
