// MLA decode (576 / 512) on the split-D kernel, bf16, both variants; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
template <>
cudaError_t run_mla<DType::kBFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  return run_split_d</*kWide=*/false, __nv_bfloat16>(params, variant, stream);
}
}  // namespace flash::decode
