// MLA decode (576 / 512) on the split-D kernel, fp16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using MlaFp16 = MlaTraits<576, 512, __half>;
static_assert(MlaFp16::kSmemBytes == kMlaSmemBytes && MlaFp16::kBlockM == kMlaBlockM && MlaFp16::kBlockN == kMlaBlockN,
              "api.h's MLA figures are stale");
template <>
cudaError_t run_mla<DType::kFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return run_mla<MlaFp16>(params, stream);
}
}  // namespace flash::decode
