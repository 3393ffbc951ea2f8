// One instantiation per file so builds parallelise and head dims can be pruned.
#include "../launch.cuh"

namespace flash::sm90 {
template cudaError_t run_fwd_cache<DType::kBFloat16, 96>(const detail::FwdParams&, MaskVariant, cudaStream_t);
}  // namespace flash::sm90
