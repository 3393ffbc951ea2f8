// float64 attention through cuBLAS DGEMM over key chunks (reference_f64.h).
//
// Rows of one (batch, kv head) are ordered r = i * group + g (query i,
// query head kv_head * group + g), so a block of consecutive rows covers
// consecutive queries and, with them, a contiguous range of visible keys:
// key chunks outside the block's range are skipped (what makes a causal
// 2^20-token call affordable).
//
// cuBLAS is column-major: a row-major [n, d] float64 matrix is a
// column-major d x n one with leading dimension d, so
//   S^T (c x R) = K (c x d) Q^T (d x R):  opA = T on K, opB = N on Q
//   O^T (d x R) = V^T (d x c) P^T (c x R): opA = N on V, opB = N on P
// with S / P row-major [R, c].
#include "reference_f64.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "make_error.h"
#include "reference.h"

namespace flash::ref {
namespace {

constexpr int64_t kMaxRowsPerBlock = 4096;
constexpr int64_t kChunkElements = int64_t{1} << 26;  // R x c doubles of S: 512 MiB
constexpr int kThreads = 256;


template <typename T>
__device__ __forceinline__ double load(const T* p);
template <>
__device__ __forceinline__ double load<__half>(const __half* p) {
  return static_cast<double>(__half2float(*p));
}
template <>
__device__ __forceinline__ double load<__nv_bfloat16>(const __nv_bfloat16* p) {
  return static_cast<double>(__bfloat162float(*p));
}

// dst[r, d] = src[(r / inner) * outer_stride + (r % inner) * inner_stride + d]
template <typename T>
__global__ void gather_kernel(const T* src, int64_t rows, int64_t inner, int64_t outer_stride, int64_t inner_stride,
                              int64_t head_dim, double* dst) {
  const int64_t total = rows * head_dim;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / head_dim, d = e % head_dim;
    dst[e] = load(src + (r / inner) * outer_stride + (r % inner) * inner_stride + d);
  }
}

// One block per row of the chunk: masks, scales and caps S[r, :], replaces
// it by exp(s - m_chunk) and writes the chunk's max and sum.
__global__ void softmax_chunk_kernel(double* s, int64_t cols, int64_t group, int64_t row0, int64_t key0,
                                     int64_t seqlen_q, int64_t seqlen_k, bool causal, int64_t window_left,
                                     int64_t window_right, double scale, double softcap, double* m_chunk,
                                     double* l_chunk) {
  const int64_t r = blockIdx.x;
  const int64_t i = (row0 + r) / group;
  const KeyRange range = visible_keys(i, seqlen_q, seqlen_k, causal, window_left, window_right);
  double* row = s + r * cols;
  __shared__ double red[kThreads];
  double m = -INFINITY;
  for (int64_t t = threadIdx.x; t < cols; t += blockDim.x) {
    const int64_t j = key0 + t;
    double x = row[t] * scale;
    if (softcap > 0.0) x = softcap * tanh(x / softcap);
    if (j < range.first || j > range.last) x = -INFINITY;
    row[t] = x;
    m = fmax(m, x);
  }
  red[threadIdx.x] = m;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] = fmax(red[threadIdx.x], red[threadIdx.x + w]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  double l = 0.0;
  for (int64_t t = threadIdx.x; t < cols; t += blockDim.x) {
    const double e = m == -INFINITY ? 0.0 : exp(row[t] - m);
    row[t] = e;
    l += e;
  }
  red[threadIdx.x] = l;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    m_chunk[r] = m;
    l_chunk[r] = red[0];
  }
}

// Folds a chunk (m_c, l_c, O_c) into the running (m, l, O) of each row.
__global__ void merge_kernel(int64_t rows, int64_t head_dim, const double* m_c, const double* l_c, const double* o_c,
                             double* m, double* l, double* o) {
  const int64_t r = blockIdx.x;
  if (r >= rows) return;
  const double mc = m_c[r], mo = m[r];
  const double mn = fmax(mc, mo);
  if (mn == -INFINITY) return;  // nothing visible yet
  const double a = mo == -INFINITY ? 0.0 : exp(mo - mn);
  const double b = mc == -INFINITY ? 0.0 : exp(mc - mn);
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    o[r * head_dim + d] = o[r * head_dim + d] * a + o_c[r * head_dim + d] * b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    l[r] = l[r] * a + l_c[r] * b;
    m[r] = mn;
  }
}

__global__ void init_kernel(int64_t rows, int64_t head_dim, double* m, double* l, double* o) {
  const int64_t total = rows * head_dim;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    o[e] = 0.0;
    if (e < rows) {
      m[e] = -INFINITY;
      l[e] = 0.0;
    }
  }
}

// O / l, and LSE = m + log l (-inf for a row that sees nothing, O = 0).
__global__ void finish_kernel(int64_t rows, int64_t head_dim, const double* m, const double* l, double* o,
                              double* lse) {
  const int64_t total = rows * head_dim;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / head_dim;
    o[e] = l[r] > 0.0 ? o[e] / l[r] : 0.0;
    if (e % head_dim == 0) lse[r] = l[r] > 0.0 ? m[r] + log(l[r]) : -INFINITY;
  }
}

unsigned grid_for(int64_t elements) {
  return static_cast<unsigned>(std::min<int64_t>((elements + kThreads - 1) / kThreads, 8192));
}

struct Scratch {
  double* q = nullptr;
  double* kv = nullptr;
  double* s = nullptr;
  double* o = nullptr;
  double* o_chunk = nullptr;
  double* m = nullptr;
  double* l = nullptr;
  double* m_chunk = nullptr;
  double* l_chunk = nullptr;
  double* lse = nullptr;
  ~Scratch() {
    for (double* p : {q, kv, s, o, o_chunk, m, l, m_chunk, l_chunk, lse}) cudaFree(p);
  }
};

template <typename T>
Status run(const AttentionParams& p, const std::vector<int64_t>& batches, cublasHandle_t handle, cudaStream_t stream,
           std::vector<double>* o_out, std::vector<double>* lse_out) {
  const int64_t hd = p.head_dim, group = p.heads_q / p.heads_kv;
  const int64_t dv = value_dim(p);  // V and O
  const int64_t rows_all = p.seqlen_q * group;
  const int64_t rows_block = std::min(rows_all, std::max(group, kMaxRowsPerBlock / group * group));
  const int64_t chunk = std::max<int64_t>(1, std::min(p.seqlen_k, kChunkElements / std::max<int64_t>(rows_block, 1)));
  const double scale = p.softmax_scale != 0.f ? p.softmax_scale : 1.0 / std::sqrt(static_cast<double>(hd));

  Scratch w;
  cudaError_t err = cudaSuccess;
  auto alloc = [&](double** ptr, int64_t n) {
    if (err == cudaSuccess) err = cudaMalloc(reinterpret_cast<void**>(ptr), static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(double));
  };
  alloc(&w.q, rows_block * hd);
  alloc(&w.kv, chunk * std::max(hd, dv));
  alloc(&w.s, rows_block * chunk);
  alloc(&w.o, rows_block * dv);
  alloc(&w.o_chunk, rows_block * dv);
  alloc(&w.m, rows_block);
  alloc(&w.l, rows_block);
  alloc(&w.m_chunk, rows_block);
  alloc(&w.l_chunk, rows_block);
  alloc(&w.lse, rows_block);
  if (err != cudaSuccess) return make_error(StatusCode::kCudaError, "double_attention: cudaMalloc: %s", cudaGetErrorString(err));
  if (cublasSetStream(handle, stream) != CUBLAS_STATUS_SUCCESS ||
      cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST) != CUBLAS_STATUS_SUCCESS) {
    return make_error(StatusCode::kCudaError, "double_attention: cublasSetStream/PointerMode failed");
  }

  const size_t o_elems = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * dv);
  o_out->assign(o_elems, std::numeric_limits<double>::quiet_NaN());
  lse_out->assign(static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q), std::numeric_limits<double>::quiet_NaN());
  std::vector<double> host_o(static_cast<size_t>(rows_block * dv)), host_lse(static_cast<size_t>(rows_block));

  std::vector<int64_t> todo = batches;
  if (todo.empty()) {
    for (int64_t b = 0; b < p.batch; ++b) todo.push_back(b);
  }
  const double one = 1.0, zero = 0.0;
  for (const int64_t b : todo) {
    if (b < 0 || b >= p.batch) return make_error(StatusCode::kInvalidArgument, "double_attention: batch %lld out of range", static_cast<long long>(b));
    for (int64_t hk = 0; hk < p.heads_kv; ++hk) {
      for (int64_t row0 = 0; row0 < rows_all; row0 += rows_block) {
        const int64_t rows = std::min(rows_block, rows_all - row0);
        const int64_t i_first = row0 / group, i_last = (row0 + rows - 1) / group;
        const KeyRange lo = visible_keys(i_first, p.seqlen_q, p.seqlen_k, p.causal, p.window_left, p.window_right);
        const KeyRange hi = visible_keys(i_last, p.seqlen_q, p.seqlen_k, p.causal, p.window_left, p.window_right);
        const int64_t key_begin = std::max<int64_t>(0, lo.first);
        const int64_t key_end = std::min<int64_t>(p.seqlen_k, hi.last + 1);
        // Q rows r = i * group + g: outer index i (seq stride), inner g (head stride).
        const T* q = static_cast<const T*>(p.q) + b * p.q_batch_stride + (row0 / group) * p.q_seq_stride +
                     hk * group * p.q_head_stride;
        gather_kernel<T><<<grid_for(rows * hd), kThreads, 0, stream>>>(q, rows, group, p.q_seq_stride, p.q_head_stride,
                                                                       hd, w.q);
        init_kernel<<<grid_for(rows * dv), kThreads, 0, stream>>>(rows, dv, w.m, w.l, w.o);
        for (int64_t key0 = key_begin; key0 < key_end; key0 += chunk) {
          const int64_t c = std::min(chunk, key_end - key0);
          const T* k = static_cast<const T*>(p.k) + b * p.k_batch_stride + key0 * p.k_seq_stride + hk * p.k_head_stride;
          gather_kernel<T><<<grid_for(c * hd), kThreads, 0, stream>>>(k, c, 1, p.k_seq_stride, 0, hd, w.kv);
          if (cublasDgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(c), static_cast<int>(rows),
                          static_cast<int>(hd), &one, w.kv, static_cast<int>(hd), w.q, static_cast<int>(hd), &zero,
                          w.s, static_cast<int>(c)) != CUBLAS_STATUS_SUCCESS) {
            return make_error(StatusCode::kCudaError, "double_attention: cublasDgemm(S) failed");
          }
          softmax_chunk_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
              w.s, c, group, row0, key0, p.seqlen_q, p.seqlen_k, p.causal, p.window_left, p.window_right, scale,
              p.softcap, w.m_chunk, w.l_chunk);
          const T* v = static_cast<const T*>(p.v) + b * p.v_batch_stride + key0 * p.v_seq_stride + hk * p.v_head_stride;
          gather_kernel<T><<<grid_for(c * dv), kThreads, 0, stream>>>(v, c, 1, p.v_seq_stride, 0, dv, w.kv);
          if (cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(dv), static_cast<int>(rows),
                          static_cast<int>(c), &one, w.kv, static_cast<int>(dv), w.s, static_cast<int>(c), &zero,
                          w.o_chunk, static_cast<int>(dv)) != CUBLAS_STATUS_SUCCESS) {
            return make_error(StatusCode::kCudaError, "double_attention: cublasDgemm(O) failed");
          }
          merge_kernel<<<static_cast<unsigned>(rows), 128, 0, stream>>>(rows, dv, w.m_chunk, w.l_chunk, w.o_chunk,
                                                                       w.m, w.l, w.o);
        }
        finish_kernel<<<grid_for(rows * dv), kThreads, 0, stream>>>(rows, dv, w.m, w.l, w.o, w.lse);
        err = cudaMemcpyAsync(host_o.data(), w.o, static_cast<size_t>(rows * dv) * sizeof(double),
                              cudaMemcpyDeviceToHost, stream);
        if (err == cudaSuccess) {
          err = cudaMemcpyAsync(host_lse.data(), w.lse, static_cast<size_t>(rows) * sizeof(double),
                                cudaMemcpyDeviceToHost, stream);
        }
        if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
        if (err != cudaSuccess) {
          return make_error(StatusCode::kCudaError, "double_attention: %s", cudaGetErrorString(err));
        }
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = (row0 + r) / group, h = hk * group + (row0 + r) % group;
          const size_t dst = static_cast<size_t>(((b * p.seqlen_q + i) * p.heads_q + h) * dv);
          std::copy_n(host_o.begin() + r * dv, dv, o_out->begin() + static_cast<std::ptrdiff_t>(dst));
          (*lse_out)[static_cast<size_t>((b * p.heads_q + h) * p.seqlen_q + i)] = host_lse[static_cast<size_t>(r)];
        }
      }
    }
  }
  return Status{};
}

}  // namespace

Status double_attention(const AttentionParams& p, const std::vector<int64_t>& batches, cublasHandle_t handle,
                        cudaStream_t stream, std::vector<double>* o, std::vector<double>* lse) {
  if (uses_varlen_or_paging(p)) {
    return make_error(StatusCode::kInvalidArgument, "double_attention: dense calls only (no varlen, seqused_k or paging)");
  }
  if (p.head_dim > INT32_MAX || p.heads_kv <= 0 || p.heads_q % p.heads_kv != 0) {
    return make_error(StatusCode::kInvalidArgument, "double_attention: bad heads or head_dim");
  }
  if (p.sinks != nullptr || p.alibi_slopes != nullptr) {
    return make_error(StatusCode::kInvalidArgument, "double_attention: no sinks or ALiBi");
  }
  if (p.dtype == DType::kFloat16) return run<__half>(p, batches, handle, stream, o, lse);
  if (p.dtype == DType::kBFloat16) return run<__nv_bfloat16>(p, batches, handle, stream, o, lse);
  return make_error(StatusCode::kInvalidArgument, "double_attention: fp16 and bf16 only");
}

}  // namespace flash::ref
