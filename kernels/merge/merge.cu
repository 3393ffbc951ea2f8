// flash::merge_states' kernel: one CTA per (batch, head, query) row, the
// row merged by merge_row (kernels/common/merge_row.cuh), the code the
// split-KV combine runs too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../common/merge_row.cuh"
#include "merge.h"

namespace flash::merge {
namespace {

template <int kHeadDim, typename Element>
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const __grid_constant__ MergeArgs a) {
  const int64_t row = blockIdx.x;  // over [batch, heads, seqlen_q], the LSE's layout
  const int64_t token = row % a.seqlen_q;
  const int64_t head = (row / a.seqlen_q) % a.heads;
  const int64_t batch = row / (static_cast<int64_t>(a.seqlen_q) * a.heads);
  const Element* in = static_cast<const Element*>(a.o_states) + batch * a.in_batch_stride +
                      token * a.in_seq_stride + head * a.in_head_stride;
  Element* out = static_cast<Element*>(a.o) + batch * a.out_batch_stride + token * a.out_seq_stride +
                 head * a.out_head_stride;
  merge_row<kHeadDim>(in, a.o_state_stride, a.lse_states + row, a.lse_state_stride, a.num_states, a.head_dim,
                      -INFINITY, out,
                      a.lse != nullptr ? a.lse + row : nullptr);
}

template <int kHeadDim, typename Element>
cudaError_t launch(const MergeArgs& a, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(a.batch) * a.heads * a.seqlen_q;
  if (rows == 0) return cudaSuccess;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(rows));
  config.blockDim = dim3(kMergeThreads);
  config.stream = stream;
  return cudaLaunchKernelEx(&config, &merge_kernel<kHeadDim, Element>, a);
}

}  // namespace

template <int kHeadDim>
cudaError_t launch_dtype(const MergeArgs& args, DType dtype, cudaStream_t stream) {
  return dtype == DType::kFloat16 ? launch<kHeadDim, __half>(args, stream)
                                  : launch<kHeadDim, __nv_bfloat16>(args, stream);
}

cudaError_t launch_merge(const MergeArgs& args, DType dtype, cudaStream_t stream) {
  // Three widths serve every head dim (the row's first args.head_dim columns).
  if (args.head_dim <= 0 || args.head_dim > 256) return cudaErrorInvalidValue;
  if (args.head_dim <= 64) return launch_dtype<64>(args, dtype, stream);
  if (args.head_dim <= 128) return launch_dtype<128>(args, dtype, stream);
  return launch_dtype<256>(args, dtype, stream);
}

}  // namespace flash::merge
