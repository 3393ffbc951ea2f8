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

bool tma_encoder_available() { return encoder() != nullptr; }

bool make_tensor_map(CUtensorMap* map, const TmaTensor& t, bool is_bf16, int box_rows) {
  return make_tensor_map(map, t, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 64,
                         box_rows);
}

bool make_tensor_map(CUtensorMap* map, const TmaTensor& t, CUtensorMapDataType type, int box_cols, int box_rows,
                     int swizzle_bytes) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encoder();
  if (encode == nullptr || tma_problem(t) != nullptr) return false;
  const CUtensorMapSwizzle swizzle = swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                     : swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                           : CU_TENSOR_MAP_SWIZZLE_NONE;
  if (swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(t.head_dim), static_cast<cuuint64_t>(t.rows),
                              static_cast<cuuint64_t>(t.heads), static_cast<cuuint64_t>(t.batch)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(tma_stride_bytes(t.rows, t.seq_stride, t.elem_bytes)),
                                 static_cast<cuuint64_t>(tma_stride_bytes(t.heads, t.head_stride, t.elem_bytes)),
                                 static_cast<cuuint64_t>(tma_stride_bytes(t.batch, t.batch_stride, t.elem_bytes))};
  const cuuint32_t box[4] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult result =
      encode(map, type, 4, const_cast<void*>(t.base), dims, strides, box, element_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return result == CUDA_SUCCESS;
}

}  // namespace flash::sm90
