// MLA decode (576 / 512) on the split-D kernel, bf16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using MlaBf16 = MlaTraits<576, 512, __nv_bfloat16>;
// Variant 1 (devices with 99 KiB a block): two stages.
using MlaBf16Small = MlaTraits<576, 512, __nv_bfloat16, false, split_d_block_n(false, 1), split_d_stages(false, 1)>;
static_assert(MlaBf16::kSmemBytes == kMlaSmemBytes && MlaBf16::kBlockM == kMlaBlockM && MlaBf16::kBlockN == kMlaBlockN &&
                  MlaBf16::kStages == split_d_stages(false, 0) && MlaBf16Small::kSmemBytes == split_d_smem(false, 1) &&
                  MlaBf16Small::kBlockM == kMlaBlockM,
              "api.h's MLA figures are stale");
template <>
cudaError_t run_mla<DType::kBFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_mla<MlaBf16>(params, stream);
  if (variant == 1) return run_mla<MlaBf16Small>(params, stream);
  return cudaErrorInvalidValue;
}
}  // namespace flash::decode
