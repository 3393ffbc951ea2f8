// Head dim 512 with its own V on the split-D kernel, fp16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using WideFp16 = MlaTraits<kWideHeadDim, kWideHeadDim, __half, /*kSeparateV=*/true>;
// Variant 1 (devices with 99 KiB a block): 16-key blocks.
using WideFp16Small =
    MlaTraits<kWideHeadDim, kWideHeadDim, __half, true, split_d_block_n(true, 1), split_d_stages(true, 1)>;
static_assert(WideFp16::kSmemBytes == kWideSmemBytes && WideFp16::kBlockM == kMlaBlockM &&
                  WideFp16::kBlockN == kMlaBlockN && WideFp16::kStages == split_d_stages(true, 0) &&
                  WideFp16Small::kSmemBytes == split_d_smem(true, 1) && WideFp16Small::kBlockM == kMlaBlockM,
              "api.h's figures are stale");
template <>
cudaError_t run_wide<DType::kFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_mla<WideFp16>(params, stream);
  if (variant == 1) return run_mla<WideFp16Small>(params, stream);
  return cudaErrorInvalidValue;
}
}  // namespace flash::decode
