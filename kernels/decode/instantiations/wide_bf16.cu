// Head dim 512 with its own V on the split-D kernel, bf16, both variants; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
template <>
cudaError_t run_wide<DType::kBFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  return run_split_d</*kWide=*/true, __nv_bfloat16>(params, variant, stream);
}
}  // namespace flash::decode
