// Head dim 512 with its own V on the split-D kernel, fp16, both variants; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
template <>
cudaError_t run_wide<DType::kFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  return run_split_d</*kWide=*/true, __half>(params, variant, stream);
}
}  // namespace flash::decode
