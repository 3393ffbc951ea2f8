// MLA decode (576 / 512) on the split-D kernel, fp16, both variants; built for every architecture.
#include "../api.h"
#include "../mla_kernel.cuh"

namespace flash::decode {
template <>
cudaError_t run_mla<DType::kFloat16>(const detail::FwdParams& params, int variant, cudaStream_t stream) {
  return run_split_d</*kWide=*/false, __half>(params, variant, stream);
}
}  // namespace flash::decode
