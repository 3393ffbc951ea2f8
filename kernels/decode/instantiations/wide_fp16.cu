// Head dim 512 with its own V on the split-D kernel, fp16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using WideFp16 = MlaTraits<kWideHeadDim, kWideHeadDim, __half, /*kSeparateV=*/true>;
static_assert(WideFp16::kSmemBytes == kWideSmemBytes && WideFp16::kBlockM == kMlaBlockM &&
                  WideFp16::kBlockN == kMlaBlockN,
              "api.h's figures are stale");
template <>
cudaError_t run_wide<DType::kFloat16>(const detail::FwdParams& params, cudaStream_t stream) {
  return run_mla<WideFp16>(params, stream);
}
}  // namespace flash::decode
