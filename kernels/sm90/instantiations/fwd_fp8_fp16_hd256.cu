// One instantiation per file so builds parallelise and head dims can be pruned.
#include "../fp8_kernel.cuh"

namespace flash::sm90 {
template cudaError_t run_fwd_fp8<DType::kFloat16, 256>(const detail::FwdParams&, MaskVariant, cudaStream_t);
}  // namespace flash::sm90
