#include "tensor_map.h"

#include <cudaTypedefs.h>

namespace flash::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  // Function-local static: initialised once, thread-safe.
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query) !=
            cudaSuccess ||
        query != cudaDriverEntryPointSuccess) {
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return fn;
}

}  // namespace

bool make_tensor_map(CUtensorMap* map, const void* base, bool is_bf16, int64_t head_dim, int64_t seqlen,
                     int64_t heads, int64_t batch, int64_t seq_stride, int64_t head_stride, int64_t batch_stride,
                     int box_rows) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr || head_dim <= 0 || seqlen <= 0 || heads <= 0 || batch <= 0) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(seqlen),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  // A broadcast (stride 0) dimension is left to the sm80 kernel; a size-1
  // dimension's stride is never used, but TMA still wants a legal one.
  if ((seq_stride == 0 && seqlen > 1) || (head_stride == 0 && heads > 1) || (batch_stride == 0 && batch > 1)) {
    return false;
  }
  auto stride_bytes = [](int64_t stride) { return static_cast<cuuint64_t>(stride == 0 ? 16 : stride * 2); };
  const cuuint64_t strides[3] = {stride_bytes(seq_stride), stride_bytes(head_stride), stride_bytes(batch_stride)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult result =
      encode(map, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4,
             const_cast<void*>(base), dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
             CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS;
}

}  // namespace flash::sm90
