// One instantiation per file so builds parallelise and head dims can be pruned.
#include "../launch.cuh"

namespace flash::decode {
template cudaError_t run_decode<DType::kFloat16, 192>(const detail::FwdParams&, int, cudaStream_t);
}  // namespace flash::decode
