// mla_decode: one decode step of DeepSeek-V2/V3's multi-head latent
// attention (MLA) in its absorbed form, against a paged latent cache.
//
// Each cached token keeps one latent row of 576 values: 512 of compressed
// KV and 64 of rotary key. With the up-projections absorbed into Q and O,
// every query head scores against that row over all 576 columns (Q K^T),
// and its output is the softmax-weighted sum of the rows' first 512 columns
// (V): one K/V head shared by all query heads, V being part of K. flash
// takes that as head_dim 576, head_dim_v 512, v == k (the same pointer and
// strides), and a softmax_scale of the caller's (DeepSeek's is
// 1/sqrt(192) times its YaRN factor; 1/sqrt(576) is not the model's).
//
// Here: three sequences of 1000, 77 and 4096 cached tokens in a pool of
// 64-token pages handed out in a shuffled order, 16 query heads (the
// share of one GPU of eight serving 128 heads), one new query token each,
// bf16. flash picks the kernel (on sm_90: the Hopper MLA kernel) and the
// split-KV count; the call needs a workspace of attention_workspace_size()
// bytes. The output is checked against a float computation on the host.
//
// Build: part of the flash CMake project (target mla_decode, links only
// flash::flash). Run: ./mla_decode
// Exit codes: 0 success, 1 an error or a result out of tolerance,
// 77 no CUDA device (the conventional "skipped" code of test drivers).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <numeric>
#include <random>
#include <vector>

#include "flash/flash.hpp"

namespace {

constexpr int kLatent = 576;    // a cached token's row: Q K^T's width (head_dim)
constexpr int kValue = 512;     // its first 512 columns: V and O (head_dim_v)
constexpr int kHeadsQ = 16;     // query heads, all sharing the one latent K/V head
constexpr int kPageSize = 64;   // tokens per page; flash takes any positive size
constexpr int kNumSeqs = 3;
constexpr int kSeqLens[kNumSeqs] = {1000, 77, 4096};

using bf16 = __nv_bfloat16;

// Prints the failing CUDA call and returns false.
bool cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(err));
  return false;
}

bool flash_ok(const flash::Status& status, const char* what) {
  if (status.ok()) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, status.message);
  return false;
}

// One device allocation, freed on destruction.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
  bool allocate(size_t bytes, const char* what) { return cuda_ok(cudaMalloc(&ptr, std::max<size_t>(bytes, 1)), what); }
};

}  // namespace

int main() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }

  // The block table: sequence b's page i is block_table[b * pages_per_seq + i],
  // pages dealt from a shuffled pool, so a sequence's pages are scattered.
  int pages_per_seq = 0;
  for (int len : kSeqLens) pages_per_seq = std::max(pages_per_seq, (len + kPageSize - 1) / kPageSize);
  const int num_pages = kNumSeqs * pages_per_seq;
  std::vector<int32_t> table(num_pages);  // one row of pages_per_seq entries per sequence
  std::iota(table.begin(), table.end(), 0);
  std::mt19937 rng(2025);
  std::shuffle(table.begin(), table.end(), rng);
  const std::vector<int32_t> lens(std::begin(kSeqLens), std::end(kSeqLens));

  // Host inputs, uniform in [-1, 1) and rounded to bf16: Q [batch, 1,
  // heads_q, 576]; the cache [num_pages, page_size, 1, 576].
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<bf16> h_q(static_cast<size_t>(kNumSeqs) * kHeadsQ * kLatent);
  std::vector<bf16> h_cache(static_cast<size_t>(num_pages) * kPageSize * kLatent);
  for (bf16& x : h_q) x = __float2bfloat16(uniform(rng));
  for (bf16& x : h_cache) x = __float2bfloat16(uniform(rng));
  std::vector<bf16> h_o(static_cast<size_t>(kNumSeqs) * kHeadsQ * kValue);

  DeviceBuffer d_q, d_cache, d_o, d_table, d_lens, d_workspace;
  cudaStream_t stream = nullptr;
  bool ok = d_q.allocate(h_q.size() * sizeof(bf16), "cudaMalloc(Q)") &&
            d_cache.allocate(h_cache.size() * sizeof(bf16), "cudaMalloc(cache)") &&
            d_o.allocate(h_o.size() * sizeof(bf16), "cudaMalloc(O)") &&
            d_table.allocate(table.size() * sizeof(int32_t), "cudaMalloc(block_table)") &&
            d_lens.allocate(lens.size() * sizeof(int32_t), "cudaMalloc(seqused_k)") &&
            cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            cuda_ok(cudaMemcpyAsync(d_q.ptr, h_q.data(), h_q.size() * sizeof(bf16), cudaMemcpyHostToDevice, stream),
                    "copy Q") &&
            cuda_ok(cudaMemcpyAsync(d_cache.ptr, h_cache.data(), h_cache.size() * sizeof(bf16),
                                    cudaMemcpyHostToDevice, stream),
                    "copy cache") &&
            cuda_ok(cudaMemcpyAsync(d_table.ptr, table.data(), table.size() * sizeof(int32_t),
                                    cudaMemcpyHostToDevice, stream),
                    "copy block_table") &&
            cuda_ok(cudaMemcpyAsync(d_lens.ptr, lens.data(), lens.size() * sizeof(int32_t), cudaMemcpyHostToDevice,
                                    stream),
                    "copy seqused_k");

  flash::AttentionParams params;
  if (ok) {
    params.dtype = flash::DType::kBFloat16;
    params.q = d_q.ptr;
    params.k = d_cache.ptr;
    params.v = d_cache.ptr;  // V is K's rows: the first head_dim_v columns of each latent row
    params.o = d_o.ptr;
    params.batch = kNumSeqs;
    params.seqlen_q = 1;  // one new token a sequence (more, with causal = true, for speculative steps)
    params.seqlen_k = static_cast<int64_t>(pages_per_seq) * kPageSize;  // what the block table can hold
    params.heads_q = kHeadsQ;
    params.heads_kv = 1;
    params.head_dim = kLatent;
    params.head_dim_v = kValue;
    params.softmax_scale = 1.f / std::sqrt(192.f);
    // Strides of dense [B, N, H, D] tensors (for MLA's shape V gets K's);
    // then the cache's batch stride becomes the stride between pages.
    params.set_contiguous_bnhd();
    params.k_batch_stride = kPageSize * params.k_seq_stride;
    params.v_batch_stride = params.k_batch_stride;
    params.block_table = static_cast<const int32_t*>(d_table.ptr);
    params.block_table_batch_stride = pages_per_seq;
    params.max_pages_per_seq = pages_per_seq;
    params.page_size = kPageSize;
    params.num_pages = num_pages;
    params.seqused_k = static_cast<const int32_t*>(d_lens.ptr);

    size_t workspace_bytes = 0;
    flash::KernelChoice choice;
    ok = flash_ok(flash::attention_workspace_size(params, &workspace_bytes), "flash::attention_workspace_size") &&
         (workspace_bytes == 0 || d_workspace.allocate(workspace_bytes, "cudaMalloc(workspace)"));
    params.workspace = d_workspace.ptr;
    params.workspace_bytes = workspace_bytes;
    ok = ok && flash_ok(flash::query_kernel_choice(params, &choice), "flash::query_kernel_choice");
    if (ok) std::printf("flash %s: %s, workspace %zu bytes\n", flash::version(), choice.name, workspace_bytes);
    ok = ok && flash_ok(flash::attention_forward(params, stream), "flash::attention_forward");
  }
  ok = ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") &&
       cuda_ok(cudaMemcpy(h_o.data(), d_o.ptr, h_o.size() * sizeof(bf16), cudaMemcpyDeviceToHost), "copy O");

  int exit_code = 1;
  if (ok) {
    // Every output against a float computation: sequence b, head h scores
    // its q row against the first lens[b] latent rows over 576 columns and
    // sums the rows' first 512 columns with the softmax's weights.
    // Token j of sequence b's latent row, where the block table puts it.
    auto latent_row = [&](int b, int j) {
      const int32_t page = table[b * pages_per_seq + j / kPageSize];
      return &h_cache[(static_cast<size_t>(page) * kPageSize + j % kPageSize) * kLatent];
    };
    float max_err = 0.f, max_ref = 0.f;
    for (int b = 0; b < kNumSeqs; ++b) {
      for (int h = 0; h < kHeadsQ; ++h) {
        const bf16* q = &h_q[(static_cast<size_t>(b) * kHeadsQ + h) * kLatent];
        std::vector<float> p(lens[b]);
        float top = -INFINITY;
        for (int j = 0; j < lens[b]; ++j) {
          const bf16* row = latent_row(b, j);
          float dot = 0.f;
          for (int d = 0; d < kLatent; ++d) dot += __bfloat162float(q[d]) * __bfloat162float(row[d]);
          p[j] = dot * params.softmax_scale;
          top = std::max(top, p[j]);
        }
        float sum = 0.f;
        for (float& x : p) sum += (x = std::exp(x - top));
        std::vector<float> out(kValue, 0.f);
        for (int j = 0; j < lens[b]; ++j) {
          const bf16* row = latent_row(b, j);
          for (int d = 0; d < kValue; ++d) out[d] += p[j] / sum * __bfloat162float(row[d]);
        }
        const bf16* got = &h_o[(static_cast<size_t>(b) * kHeadsQ + h) * kValue];
        for (int d = 0; d < kValue; ++d) {
          max_err = std::max(max_err, std::fabs(__bfloat162float(got[d]) - out[d]));
          max_ref = std::max(max_ref, std::fabs(out[d]));
        }
      }
    }
    // bf16 output keeps 8 significant bits, and P is rounded to bf16 inside
    // the kernel: against outputs of magnitude max_ref, 2% of it.
    const float tolerance = 2e-2f * std::max(max_ref, 1e-3f);
    std::printf("O[0, 0, 0, 0:4] = %.4f %.4f %.4f %.4f\n", __bfloat162float(h_o[0]), __bfloat162float(h_o[1]),
                __bfloat162float(h_o[2]), __bfloat162float(h_o[3]));
    std::printf("max abs error over all %zu outputs: %.3e (tolerance %.1e) -> %s\n", h_o.size(), max_err, tolerance,
                max_err <= tolerance ? "OK" : "FAILED");
    exit_code = max_err <= tolerance ? 0 : 1;
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
  return exit_code;
}
