// Head dim 512 with its own V on the split-D kernel, bf16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using WideBf16 = MlaTraits<kWideHeadDim, kWideHeadDim, __nv_bfloat16, /*kSeparateV=*/true>;
// Variant 1 (devices with 99 KiB a block): 16-key blocks.
using WideBf16Small =
    MlaTraits<kWideHeadDim, kWideHeadDim, __nv_bfloat16, true, split_d_block_n(true, 1), split_d_stages(true, 1)>;
static_assert(WideBf16::kSmemBytes == kWideSmemBytes && WideBf16::kBlockM == kMlaBlockM &&
                  WideBf16::kBlockN == kMlaBlockN && WideBf16::kStages == split_d_stages(true, 0) &&
                  WideBf16Small::kSmemBytes == split_d_smem(true, 1) && WideBf16Small::kBlockM == kMlaBlockM,
              "api.h's figures are stale");
template <>
cudaError_t run_wide<DType::kBFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_mla<WideBf16>(params, stream);
  if (variant == 1) return run_mla<WideBf16Small>(params, stream);
  return cudaErrorInvalidValue;
}
}  // namespace flash::decode
