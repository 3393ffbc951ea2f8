// MLA decode (576 / 512) on the split-D kernel, fp16; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
using MlaFp16 = MlaTraits<576, 512, __half>;
// Variant 1 (devices with 99 KiB a block): two stages.
using MlaFp16Small = MlaTraits<576, 512, __half, false, split_d_block_n(false, 1), split_d_stages(false, 1)>;
static_assert(MlaFp16::kSmemBytes == kMlaSmemBytes && MlaFp16::kBlockM == kMlaBlockM && MlaFp16::kBlockN == kMlaBlockN &&
                  MlaFp16::kStages == split_d_stages(false, 0) && MlaFp16Small::kSmemBytes == split_d_smem(false, 1) &&
                  MlaFp16Small::kBlockM == kMlaBlockM,
              "api.h's MLA figures are stale");
template <>
cudaError_t run_mla<DType::kFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  if (variant == 0) return run_mla<MlaFp16>(params, stream);
  if (variant == 1) return run_mla<MlaFp16Small>(params, stream);
  return cudaErrorInvalidValue;
}
}  // namespace flash::decode
