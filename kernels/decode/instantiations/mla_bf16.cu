// MLA decode (576 / 512) on the split-D kernel, bf16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using MlaBf16 = MlaTraits<576, 512, __nv_bfloat16>;
static_assert(MlaBf16::kSmemBytes == kMlaSmemBytes && MlaBf16::kBlockM == kMlaBlockM && MlaBf16::kBlockN == kMlaBlockN,
              "api.h's MLA figures are stale");
template <>
cudaError_t run_mla<DType::kBFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return run_mla<MlaBf16>(params, stream);
}
}  // namespace flash::decode
