// Naive "standard attention" through cuBLAS: the GPU reference of the tests
// and the "standard attention" of the benchmark.
//
// For each batch b and each group offset g (query head h = hk * group + g
// for kv head hk), the heads_kv kv heads are one strided-batched GEMM:
//   S = Q K^T           float32 (cublasGemmStridedBatchedEx)
//   P = softmax(mask(cap(scale * S))), written in the input dtype, plus the
//                       LSE (mask: causal and sliding window; cap: softcap)
//   O = P V             float32 accumulation, written in the input dtype
//                       and, on request, in float32.
// cuBLAS is column-major, so a row-major [seqlen, head_dim] slice with
// sequence stride s is a column-major head_dim x seqlen matrix with leading
// dimension s: S^T = K Q^T and O^T = V^T P^T need no copies. Only strides
// cuBLAS cannot express as a leading dimension (a sequence stride below
// head_dim, e.g. 0 for a broadcast K, or above INT_MAX) are first packed
// into the workspace.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <cstdio>

#include "element.cuh"
#include "make_error.h"
#include "reference.h"

namespace flash::ref {
namespace {

constexpr size_t kWorkspaceAlign = 256;
constexpr int64_t kElementBytes = 2;  // fp16 and bf16
constexpr int kSoftmaxThreads = 256;
constexpr int kCopyThreads = 256;
constexpr int64_t kMaxCopyBlocks = 4096;  // grid-stride beyond this


Status cuda_error(cudaError_t err, const char* what) {
  return make_error(StatusCode::kCudaError, "standard_attention: %s failed: %s", what, cudaGetErrorString(err));
}

Status cublas_error(cublasStatus_t err, const char* what) {
  return make_error(StatusCode::kCudaError, "standard_attention: %s failed: %s", what, cublasGetStatusString(err));
}

size_t align_up(size_t bytes) { return (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

unsigned copy_blocks(int64_t count) {
  const int64_t needed = (count + kCopyThreads - 1) / kCopyThreads;
  return static_cast<unsigned>(needed < kMaxCopyBlocks ? needed : kMaxCopyBlocks);
}

// cuBLAS takes a row-major [seqlen, head_dim] slice as a column-major matrix
// whose leading dimension is the sequence stride, which it needs in
// [head_dim, INT_MAX]. With a single row any stride will do.
bool usable_as_ld(int64_t seq_stride, int64_t seqlen, int64_t head_dim) {
  return seqlen <= 1 || (seq_stride >= head_dim && seq_stride <= INT_MAX);
}

// Where each scratch buffer lives in the workspace (byte offsets).
struct WorkspacePlan {
  size_t s = 0, p = 0, q_pack = 0, k_pack = 0, v_pack = 0, o_pack = 0;
  bool pack_q = false, pack_k = false, pack_v = false, pack_o = false;
  size_t total = 0;
};

WorkspacePlan plan_workspace(const AttentionParams& p) {
  WorkspacePlan w;
  if (!validate(p).ok() || p.batch == 0 || p.seqlen_q == 0 || p.seqlen_k == 0) return w;
  const size_t heads = static_cast<size_t>(p.heads_kv);
  const size_t scores = heads * static_cast<size_t>(p.seqlen_q) * static_cast<size_t>(p.seqlen_k);
  size_t offset = 0;
  auto take = [&offset](size_t bytes) {
    const size_t at = offset;
    offset += align_up(bytes);
    return at;
  };
  w.s = take(scores * sizeof(float));
  w.p = take(scores * kElementBytes);
  const size_t q_rows = heads * static_cast<size_t>(p.seqlen_q) * static_cast<size_t>(p.head_dim) * kElementBytes;
  const size_t k_rows = heads * static_cast<size_t>(p.seqlen_k) * static_cast<size_t>(p.head_dim) * kElementBytes;
  const int64_t dv = value_dim(p);
  const size_t v_rows = heads * static_cast<size_t>(p.seqlen_k) * static_cast<size_t>(dv) * kElementBytes;
  const size_t o_rows = heads * static_cast<size_t>(p.seqlen_q) * static_cast<size_t>(dv) * kElementBytes;
  w.pack_q = !usable_as_ld(p.q_seq_stride, p.seqlen_q, p.head_dim);
  w.pack_k = !usable_as_ld(p.k_seq_stride, p.seqlen_k, p.head_dim);
  w.pack_v = !usable_as_ld(p.v_seq_stride, p.seqlen_k, dv);
  w.pack_o = !usable_as_ld(p.o_seq_stride, p.seqlen_q, dv);
  if (w.pack_q) w.q_pack = take(q_rows);
  if (w.pack_k) w.k_pack = take(k_rows);
  if (w.pack_v) w.v_pack = take(v_rows);
  if (w.pack_o) w.o_pack = take(o_rows);
  w.total = offset;
  return w;
}

// Running softmax statistics of part of a row: max m of the scaled scores
// and l = sum of exp(x - m). m = -inf, l = 0 for an empty part.
struct RowStats {
  float m;
  float l;
};

__device__ __forceinline__ RowStats combine(RowStats a, RowStats b) {
  if (a.m < b.m) {
    const RowStats t = a;
    a = b;
    b = t;
  }
  if (b.m == -INFINITY) return a;  // also covers two empty parts
  return {a.m, a.l + b.l * expf(b.m - a.m)};
}

__device__ __forceinline__ RowStats warp_combine(RowStats s) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const RowStats other{__shfl_xor_sync(0xffffffffu, s.m, offset), __shfl_xor_sync(0xffffffffu, s.l, offset)};
    s = combine(s, other);
  }
  return s;
}

// One block per (row, kv head) of S: P = softmax(cap(scale * S)) over the
// keys the row sees (bottom-right causal mask and sliding window, see
// visible_keys), 0 elsewhere; cap(x) = softcap * tanh(x / softcap) when
// softcap > 0, else x. A row that sees no key gets P = 0 and LSE = -inf.
// With `sinks` (null: none), query head sink_head0 + sink_head_step * head
// has one more logit in its softmax, sinks[...], with no column in P: it
// adds to the denominator and the LSE only (a row that sees no key: LSE =
// the sink). With `alibi` (null: none), the score of key j gains
// -alibi[...same head...] * |row + seqlen_k - seqlen_q - j| after the cap.
// Two passes over the row: online max/sum, then write.
template <typename T>
__global__ void __launch_bounds__(kSoftmaxThreads)
    masked_softmax_kernel(const float* s, T* p, float* lse, int64_t lse_head_stride, int seqlen_q, int seqlen_k,
                          float scale, float softcap, int64_t first_offset, int64_t last_offset,
                          const float* sinks, const float* alibi, int64_t sink_head0, int64_t sink_head_step) {
  constexpr int kWarps = kSoftmaxThreads / 32;
  __shared__ RowStats warp_stats[kWarps];
  __shared__ RowStats row_stats;

  const int row = blockIdx.x;
  const int head = blockIdx.y;
  const size_t offset = (static_cast<size_t>(head) * seqlen_q + row) * seqlen_k;
  const float* s_row = s + offset;
  T* p_row = p + offset;
  // Keys first..last of the row: first_offset/last_offset relative to the
  // row's diagonal (row + seqlen_k - seqlen_q), clamped to [0, seqlen_k).
  const int64_t diagonal = static_cast<int64_t>(row) + seqlen_k - seqlen_q;
  const int64_t first64 = diagonal + first_offset > 0 ? diagonal + first_offset : 0;
  const int64_t last64 = diagonal + last_offset < seqlen_k - 1 ? diagonal + last_offset : seqlen_k - 1;
  const int first = static_cast<int>(first64 < seqlen_k ? first64 : seqlen_k);
  const int last = static_cast<int>(last64 >= -1 ? last64 : -1);
  const bool sees_keys = first <= last;
  const float slope = alibi != nullptr ? alibi[sink_head0 + sink_head_step * head] : 0.f;
  auto score = [&](int j) {
    const float x = s_row[j] * scale;
    const float capped = softcap > 0.f ? softcap * tanhf(x / softcap) : x;
    return capped - slope * fabsf(static_cast<float>(diagonal - j));
  };

  RowStats stats{-INFINITY, 0.f};
  for (int j = first + static_cast<int>(threadIdx.x); j <= last; j += kSoftmaxThreads) {
    const float x = score(j);
    if (x > stats.m) {
      stats.l = stats.l * expf(stats.m - x) + 1.f;  // expf(-inf) = 0 on the first key
      stats.m = x;
    } else {
      stats.l += expf(x - stats.m);
    }
  }
  stats = warp_combine(stats);
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (lane == 0) warp_stats[warp] = stats;
  __syncthreads();
  if (warp == 0) {
    stats = lane < kWarps ? warp_stats[lane] : RowStats{-INFINITY, 0.f};
    stats = warp_combine(stats);
    if (lane == 0) row_stats = stats;
  }
  __syncthreads();
  stats = row_stats;
  if (sinks != nullptr) stats = combine(stats, RowStats{sinks[sink_head0 + sink_head_step * head], 1.f});
  const bool has_sum = stats.m != -INFINITY;

  const float inv_l = sees_keys ? 1.f / stats.l : 0.f;
  for (int j = threadIdx.x; j < seqlen_k; j += kSoftmaxThreads) {
    const float prob = j >= first && j <= last ? expf(score(j) - stats.m) * inv_l : 0.f;
    p_row[j] = to_element<T>(prob);
  }
  if (lse != nullptr && threadIdx.x == 0) {
    lse[head * lse_head_stride + row] = has_sum ? stats.m + logf(stats.l) : -INFINITY;
  }
}

// Copies `heads` strided [seqlen, head_dim] slices of 16-bit elements.
__global__ void copy_heads_kernel(const uint16_t* src, int64_t src_head_stride, int64_t src_seq_stride, uint16_t* dst,
                                  int64_t dst_head_stride, int64_t dst_seq_stride, int64_t heads, int64_t seqlen,
                                  int64_t head_dim) {
  const int64_t count = heads * seqlen * head_dim;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count; idx += step) {
    const int64_t d = idx % head_dim;
    const int64_t i = (idx / head_dim) % seqlen;
    const int64_t h = idx / (head_dim * seqlen);
    dst[h * dst_head_stride + i * dst_seq_stride + d] = src[h * src_head_stride + i * src_seq_stride + d];
  }
}

// seqlen_k == 0: every row sees no key, so O = 0 and LSE = -inf.
__global__ void write_empty_kernel(uint16_t* o, int64_t o_batch_stride, int64_t o_seq_stride, int64_t o_head_stride,
                                   float* o_f32, float* lse, int64_t batch, int64_t seqlen_q, int64_t heads_q,
                                   int64_t head_dim) {
  const int64_t count = batch * seqlen_q * heads_q * head_dim;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < count; idx += step) {
    // idx enumerates [batch, seqlen_q, heads_q, head_dim] densely, the o_f32 layout.
    const int64_t d = idx % head_dim;
    const int64_t h = (idx / head_dim) % heads_q;
    const int64_t i = (idx / (head_dim * heads_q)) % seqlen_q;
    const int64_t b = idx / (head_dim * heads_q * seqlen_q);
    o[b * o_batch_stride + i * o_seq_stride + h * o_head_stride + d] = 0;  // +0 in fp16 and bf16
    if (o_f32 != nullptr) o_f32[idx] = 0.f;
    if (lse != nullptr && d == 0) lse[(b * heads_q + h) * seqlen_q + i] = -INFINITY;
  }
}

// One GEMM operand: kv-head-batched [seqlen, head_dim] slices as cuBLAS sees them.
struct Operand {
  const void* ptr;
  long long head_stride;  // elements between the slices of consecutive kv heads
  int ld;                 // leading dimension (sequence stride)
};

// The operand for `heads` slices at `src`; packs them densely into `pack`
// first when cuBLAS cannot take the sequence stride as is.
Status make_operand(const char* src, int64_t head_stride, int64_t seq_stride, int64_t heads, int64_t seqlen,
                    int64_t head_dim, void* pack, cudaStream_t stream, Operand* out) {
  if (pack == nullptr) {
    *out = {src, head_stride, static_cast<int>(seqlen <= 1 ? head_dim : seq_stride)};
    return Status{};
  }
  const int64_t count = heads * seqlen * head_dim;
  copy_heads_kernel<<<copy_blocks(count), kCopyThreads, 0, stream>>>(
      reinterpret_cast<const uint16_t*>(src), head_stride, seq_stride, static_cast<uint16_t*>(pack),
      seqlen * head_dim, head_dim, heads, seqlen, head_dim);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return cuda_error(err, "packing an operand");
  *out = {pack, seqlen * head_dim, static_cast<int>(head_dim)};
  return Status{};
}

Status gemm(cublasHandle_t handle, cublasOperation_t trans_a, int m, int n, int k, const Operand& a,
            const Operand& b, void* c, cudaDataType c_type, int ldc, long long c_stride, cudaDataType in_type,
            int batch_count, const char* what) {
  const float alpha = 1.f;
  const float beta = 0.f;
  const cublasStatus_t err = cublasGemmStridedBatchedEx(
      handle, trans_a, CUBLAS_OP_N, m, n, k, &alpha, a.ptr, in_type, a.ld, a.head_stride, b.ptr, in_type, b.ld,
      b.head_stride, &beta, c, c_type, ldc, c_stride, batch_count, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  return err == CUBLAS_STATUS_SUCCESS ? Status{} : cublas_error(err, what);
}

const char* at_element(const void* base, int64_t elements) {
  return static_cast<const char*>(base) + elements * kElementBytes;
}

}  // namespace

size_t standard_attention_workspace_bytes(const AttentionParams& p) { return plan_workspace(p).total; }

Status standard_attention(const AttentionParams& p, float* o_f32, void* workspace, size_t workspace_bytes,
                          cublasHandle_t handle, cudaStream_t stream) {
  if (uses_varlen_or_paging(p)) {
    return make_error(StatusCode::kInvalidArgument,
                      "standard_attention is dense-only: cu_seqlens_q/k, seqused_k and block_table must be null "
                      "(check varlen and paged calls per sequence)");
  }
  Status status = validate(p);
  if (!status.ok()) return status;
  if (p.batch == 0 || p.seqlen_q == 0) return status;

  if (p.seqlen_k == 0) {
    const int64_t count = p.batch * p.seqlen_q * p.heads_q * value_dim(p);
    write_empty_kernel<<<copy_blocks(count), kCopyThreads, 0, stream>>>(
        static_cast<uint16_t*>(p.o), p.o_batch_stride, p.o_seq_stride, p.o_head_stride, o_f32, p.lse, p.batch,
        p.seqlen_q, p.heads_q, value_dim(p));
    const cudaError_t err = cudaGetLastError();
    return err == cudaSuccess ? Status{} : cuda_error(err, "writing the empty output");
  }

  const WorkspacePlan w = plan_workspace(p);
  if (workspace_bytes < w.total || workspace == nullptr) {
    return make_error(StatusCode::kInvalidArgument,
                      "standard_attention: workspace is %zu bytes at %p; it needs %zu "
                      "(standard_attention_workspace_bytes)",
                      workspace_bytes, workspace, w.total);
  }
  cublasStatus_t cublas_status = cublasSetStream(handle, stream);
  if (cublas_status == CUBLAS_STATUS_SUCCESS) cublas_status = cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST);
  if (cublas_status != CUBLAS_STATUS_SUCCESS) return cublas_error(cublas_status, "configuring the cuBLAS handle");

  char* ws = static_cast<char*>(workspace);
  float* s = reinterpret_cast<float*>(ws + w.s);
  void* prob = ws + w.p;
  const cudaDataType in_type = p.dtype == DType::kFloat16 ? CUDA_R_16F : CUDA_R_16BF;
  const int64_t group = p.heads_q / p.heads_kv;
  const int64_t heads = p.heads_kv;
  const int seqlen_q = static_cast<int>(p.seqlen_q);
  const int seqlen_k = static_cast<int>(p.seqlen_k);
  const int head_dim = static_cast<int>(p.head_dim);
  const int64_t dv64 = value_dim(p);  // V and O
  const int dv = static_cast<int>(dv64);
  const int batch_count = static_cast<int>(heads);
  const long long score_stride = static_cast<long long>(p.seqlen_q) * p.seqlen_k;
  const float scale = p.softmax_scale != 0.f ? p.softmax_scale : 1.f / std::sqrt(static_cast<float>(p.head_dim));
  // The window as offsets from each row's diagonal; an unbounded side gets a
  // sentinel past every key (the kernel clamps to [0, seqlen_k)).
  const int64_t window_right = p.causal ? 0 : p.window_right;
  const int64_t unbounded = p.seqlen_q + p.seqlen_k;
  const int64_t first_offset = p.window_left >= 0 && p.window_left < unbounded ? -p.window_left : -unbounded;
  const int64_t last_offset = window_right >= 0 && window_right < unbounded ? window_right : unbounded;

  for (int64_t b = 0; b < p.batch; ++b) {
    Operand k{}, v{};
    status = make_operand(at_element(p.k, b * p.k_batch_stride), p.k_head_stride, p.k_seq_stride, heads,
                          p.seqlen_k, p.head_dim, w.pack_k ? ws + w.k_pack : nullptr, stream, &k);
    if (!status.ok()) return status;
    status = make_operand(at_element(p.v, b * p.v_batch_stride), p.v_head_stride, p.v_seq_stride, heads,
                          p.seqlen_k, dv64, w.pack_v ? ws + w.v_pack : nullptr, stream, &v);
    if (!status.ok()) return status;

    for (int64_t g = 0; g < group; ++g) {
      // Query head hk * group + g for kv head hk: consecutive GEMM batch items
      // are `group` query heads apart.
      Operand q{};
      status = make_operand(at_element(p.q, b * p.q_batch_stride + g * p.q_head_stride), group * p.q_head_stride,
                            p.q_seq_stride, heads, p.seqlen_q, p.head_dim, w.pack_q ? ws + w.q_pack : nullptr,
                            stream, &q);
      if (!status.ok()) return status;

      // S^T (seqlen_k x seqlen_q, column-major) = K Q^T: S row-major per head.
      status = gemm(handle, CUBLAS_OP_T, seqlen_k, seqlen_q, head_dim, k, q, s, CUDA_R_32F, seqlen_k, score_stride,
                    in_type, batch_count, "S = Q K^T (cublasGemmStridedBatchedEx)");
      if (!status.ok()) return status;

      float* lse = p.lse != nullptr ? p.lse + (b * p.heads_q + g) * p.seqlen_q : nullptr;
      const dim3 grid(static_cast<unsigned>(seqlen_q), static_cast<unsigned>(heads));
      if (p.dtype == DType::kFloat16) {
        masked_softmax_kernel<<<grid, kSoftmaxThreads, 0, stream>>>(s, static_cast<__half*>(prob), lse,
                                                                    group * p.seqlen_q, seqlen_q, seqlen_k, scale,
                                                                    p.softcap, first_offset, last_offset, p.sinks,
                                                                    p.alibi_slopes, g, group);
      } else {
        masked_softmax_kernel<<<grid, kSoftmaxThreads, 0, stream>>>(s, static_cast<__nv_bfloat16*>(prob), lse,
                                                                    group * p.seqlen_q, seqlen_q, seqlen_k, scale,
                                                                    p.softcap, first_offset, last_offset, p.sinks,
                                                                    p.alibi_slopes, g, group);
      }
      const cudaError_t err = cudaGetLastError();
      if (err != cudaSuccess) return cuda_error(err, "the mask + softmax kernel");

      // O^T (head_dim x seqlen_q, column-major) = V^T P^T: O row-major per head.
      const Operand probs{prob, score_stride, seqlen_k};
      const int64_t o_offset = b * p.o_batch_stride + g * p.o_head_stride;
      char* o = const_cast<char*>(at_element(p.o, o_offset));
      if (w.pack_o) {
        status = gemm(handle, CUBLAS_OP_N, dv, seqlen_q, seqlen_k, v, probs, ws + w.o_pack, in_type, dv,
                      static_cast<long long>(p.seqlen_q) * dv64, in_type, batch_count,
                      "O = P V (cublasGemmStridedBatchedEx)");
        if (!status.ok()) return status;
        const int64_t count = heads * p.seqlen_q * dv64;
        copy_heads_kernel<<<copy_blocks(count), kCopyThreads, 0, stream>>>(
            reinterpret_cast<const uint16_t*>(ws + w.o_pack), p.seqlen_q * dv64, dv64,
            reinterpret_cast<uint16_t*>(o), group * p.o_head_stride, p.o_seq_stride, heads, p.seqlen_q, dv64);
        const cudaError_t copy_err = cudaGetLastError();
        if (copy_err != cudaSuccess) return cuda_error(copy_err, "unpacking O");
      } else {
        const int ldc = static_cast<int>(p.seqlen_q <= 1 ? dv64 : p.o_seq_stride);
        status = gemm(handle, CUBLAS_OP_N, dv, seqlen_q, seqlen_k, v, probs, o, in_type, ldc,
                      group * p.o_head_stride, in_type, batch_count, "O = P V (cublasGemmStridedBatchedEx)");
        if (!status.ok()) return status;
      }
      if (o_f32 != nullptr) {
        // Dense [batch, seqlen_q, heads_q, head_dim_v] float32.
        float* o32 = o_f32 + (b * p.seqlen_q * p.heads_q + g) * dv64;
        status = gemm(handle, CUBLAS_OP_N, dv, seqlen_q, seqlen_k, v, probs, o32, CUDA_R_32F,
                      static_cast<int>(p.heads_q * dv64), group * dv64, in_type, batch_count,
                      "O = P V in float32 (cublasGemmStridedBatchedEx)");
        if (!status.ok()) return status;
      }
    }
  }
  return Status{};
}

}  // namespace flash::ref
