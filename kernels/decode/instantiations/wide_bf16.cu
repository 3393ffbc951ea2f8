// Head dim 512 with its own V on the split-D kernel, bf16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using WideBf16 = MlaTraits<kWideHeadDim, kWideHeadDim, __nv_bfloat16, /*kSeparateV=*/true>;
static_assert(WideBf16::kSmemBytes == kWideSmemBytes && WideBf16::kBlockM == kMlaBlockM &&
                  WideBf16::kBlockN == kMlaBlockN,
              "api.h's figures are stale");
template <>
cudaError_t run_wide<DType::kBFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return run_mla<WideBf16>(params, stream);
}
}  // namespace flash::decode
