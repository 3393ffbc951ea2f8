// paged_decode: the attention calls of an inference engine's generation
// loop, against a paged KV cache.
//
// Four sequences with prompts of 37, 300, 1000 and 5 tokens share one pool
// of K/V pages (16 keys each). Pages are handed out from a shuffled free
// list as sequences grow, so a sequence's pages are scattered through the
// pool; a block table maps each sequence's i-th page to its place in the
// pool. Then:
//
//   prefill  append every prompt's K/V rows to the cache (append_kv_kernel
//            below), then one varlen call for all prompts: Q packed
//            [total tokens, heads, head_dim] with cu_seqlens_q, K/V read
//            through the block table, causal.
//   decode   8 steps; each appends one new token's K/V per sequence and
//            calls attention with one query per sequence, seqused_k = the
//            sequence lengths, and split-KV chosen by flash (num_splits 0)
//            with a workspace of attention_workspace_size() bytes.
//
// After every call it copies the cache back, checks that each sequence's
// keys and values are where the block table says, and compares the output
// with a float computation on the host. bf16, heads_q 8, heads_kv 2 (GQA),
// head_dim 128.
//
// Build: part of the flash CMake project (target paged_decode, links only
// flash::flash). Run: ./paged_decode
// Exit codes: 0 success, 1 an error or a result out of tolerance,
// 77 no CUDA device (the conventional "skipped" code of test drivers).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "flash/flash.hpp"

namespace {

constexpr int kNumSeqs = 4;
constexpr int kPromptLens[kNumSeqs] = {37, 300, 1000, 5};
constexpr int kDecodeSteps = 8;
constexpr int kHeadsQ = 8;
constexpr int kHeadsKv = 2;
constexpr int kHeadDim = 128;
constexpr int kPageSize = 16;  // keys per page; flash takes any positive size

// A token's K (or V) row: all K/V heads, [heads_kv, head_dim].
constexpr int kKvRow = kHeadsKv * kHeadDim;
// A token's Q (or O) row: [heads_q, head_dim].
constexpr int kQRow = kHeadsQ * kHeadDim;
// The block table has a row of kMaxPagesPerSeq entries per sequence, enough
// for the longest sequence at the end; the pool has that many pages for
// every sequence (an engine sizes it from its memory budget instead).
constexpr int longest_prompt() {
  int n = 0;
  for (int len : kPromptLens) n = len > n ? len : n;
  return n;
}
constexpr int kMaxSeqLen = longest_prompt() + kDecodeSteps;
constexpr int kMaxPagesPerSeq = (kMaxSeqLen + kPageSize - 1) / kPageSize;
constexpr int kNumPages = kNumSeqs * kMaxPagesPerSeq;

using bf16 = __nv_bfloat16;

// Appends new K/V rows to the paged cache. Sequence b = blockIdx.y appends
// the rows cu_new[b] .. cu_new[b+1] - 1 of new_k / new_v ([tokens, heads_kv,
// head_dim]) at positions cache_len[b], cache_len[b] + 1, ...; position pos
// of sequence b lives in page block_table[b * max_pages_per_seq + pos /
// page_size], row pos % page_size. The cache is [num_pages, page_size,
// heads_kv, head_dim]. One thread block per new token (blockIdx.x); its
// threads copy the token's heads_kv * head_dim elements.
__global__ void append_kv_kernel(bf16* k_cache, bf16* v_cache, const bf16* new_k, const bf16* new_v,
                                 const int32_t* cu_new, const int32_t* cache_len, const int32_t* block_table,
                                 int max_pages_per_seq, int page_size, int row_elems) {
  const int b = blockIdx.y;
  const int i = blockIdx.x;
  const int first = cu_new[b];
  if (i >= cu_new[b + 1] - first) return;
  const int pos = cache_len[b] + i;
  const int page = block_table[b * max_pages_per_seq + pos / page_size];
  const size_t dst = (static_cast<size_t>(page) * page_size + pos % page_size) * row_elems;
  const size_t src = static_cast<size_t>(first + i) * row_elems;
  for (int e = threadIdx.x; e < row_elems; e += blockDim.x) {
    k_cache[dst + e] = new_k[src + e];
    v_cache[dst + e] = new_v[src + e];
  }
}

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

// One device allocation of `count` elements of T, freed on destruction.
template <typename T>
struct DeviceArray {
  T* ptr = nullptr;
  size_t count = 0;

  DeviceArray() = default;
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(ptr); }

  bool allocate(size_t n, const char* what) {
    cudaFree(ptr);
    ptr = nullptr;
    count = n;
    return cuda_ok(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T)), what);
  }
  bool upload(const std::vector<T>& host, cudaStream_t stream, const char* what) {
    return cuda_ok(cudaMemcpyAsync(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream), what);
  }
  bool download(std::vector<T>* host, size_t n, const char* what) const {
    host->resize(n);
    return cuda_ok(cudaMemcpy(host->data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost), what);
  }
};

// The host side of the cache: which pool pages are free, the block table,
// each sequence's length, and (for the checks) every K/V row appended so far
// in sequence order.
struct CacheBook {
  std::vector<int32_t> free_pages;   // handed out from the back
  std::vector<int32_t> block_table;  // [kNumSeqs, kMaxPagesPerSeq]; unused entries 0 (never read)
  std::vector<int32_t> lens = std::vector<int32_t>(kNumSeqs, 0);
  std::vector<std::vector<bf16>> keys = std::vector<std::vector<bf16>>(kNumSeqs);  // [len, heads_kv, D]
  std::vector<std::vector<bf16>> values = std::vector<std::vector<bf16>>(kNumSeqs);

  explicit CacheBook(std::mt19937& rng) : block_table(kNumSeqs * kMaxPagesPerSeq, 0) {
    for (int page = 0; page < kNumPages; ++page) free_pages.push_back(page);
    std::shuffle(free_pages.begin(), free_pages.end(), rng);
  }

  // Gives sequence b pages for `new_len` tokens, taking them from the free list.
  bool reserve(int b, int new_len) {
    const int have = (lens[b] + kPageSize - 1) / kPageSize;
    const int need = (new_len + kPageSize - 1) / kPageSize;
    if (need > kMaxPagesPerSeq || need - have > static_cast<int>(free_pages.size())) {
      std::fprintf(stderr, "sequence %d: no room for %d tokens\n", b, new_len);
      return false;
    }
    for (int i = have; i < need; ++i) {
      block_table[b * kMaxPagesPerSeq + i] = free_pages.back();
      free_pages.pop_back();
    }
    return true;
  }
};

// The device side: the page pool and the small per-call arrays.
struct DeviceState {
  DeviceArray<bf16> k_cache, v_cache;  // [kNumPages, kPageSize, heads_kv, D]
  DeviceArray<int32_t> block_table;    // [kNumSeqs, kMaxPagesPerSeq]
  DeviceArray<int32_t> seqused_k;      // [kNumSeqs]: keys in the cache per sequence
  DeviceArray<int32_t> cache_len;      // [kNumSeqs]: lengths before an append
  DeviceArray<int32_t> cu_new;         // [kNumSeqs + 1]: new tokens per sequence, as offsets
  DeviceArray<bf16> new_k, new_v;      // [tokens, heads_kv, D]: rows to append
  DeviceArray<bf16> q, o;              // [tokens, heads_q, D]
  DeviceArray<unsigned char> workspace;
};

std::vector<bf16> random_bf16(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<bf16> out(n);
  for (bf16& x : out) x = __float2bfloat16(uniform(rng));
  return out;
}

// Appends new_counts[b] tokens to every sequence b: their K/V rows are
// new_k / new_v ([tokens, heads_kv, D], packed in sequence order). Pages
// first (host), then the block table, the lengths and the rows go to the
// device, and the kernel writes the rows into their pages.
bool append(CacheBook& book, DeviceState& dev, const std::vector<int>& new_counts, const std::vector<bf16>& new_k,
            const std::vector<bf16>& new_v, cudaStream_t stream) {
  std::vector<int32_t> cu(kNumSeqs + 1, 0);    // row offsets of each sequence's new tokens
  std::vector<int32_t> new_lens(kNumSeqs, 0);  // lengths after the append: the next call's seqused_k
  int max_new = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    new_lens[b] = book.lens[b] + new_counts[b];
    if (!book.reserve(b, new_lens[b])) return false;
    cu[b + 1] = cu[b] + new_counts[b];
    max_new = std::max(max_new, new_counts[b]);
  }
  bool ok = dev.block_table.upload(book.block_table, stream, "copy block table") &&
            dev.cache_len.upload(book.lens, stream, "copy cache lengths") &&
            dev.cu_new.upload(cu, stream, "copy cu_new") && dev.new_k.upload(new_k, stream, "copy new K") &&
            dev.new_v.upload(new_v, stream, "copy new V") && dev.seqused_k.upload(new_lens, stream, "copy seqused_k");
  if (ok && max_new > 0) {
    append_kv_kernel<<<dim3(max_new, kNumSeqs), 128, 0, stream>>>(
        dev.k_cache.ptr, dev.v_cache.ptr, dev.new_k.ptr, dev.new_v.ptr, dev.cu_new.ptr, dev.cache_len.ptr,
        dev.block_table.ptr, kMaxPagesPerSeq, kPageSize, kKvRow);
    ok = cuda_ok(cudaGetLastError(), "append_kv_kernel");
  }
  // The host vectors above must stay untouched until the copies are done.
  ok = ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(append)");
  // The host's record: the new rows, in order, and the new lengths.
  for (int b = 0; b < kNumSeqs && ok; ++b) {
    const size_t first = static_cast<size_t>(cu[b]) * kKvRow;
    const size_t last = static_cast<size_t>(cu[b + 1]) * kKvRow;
    book.keys[b].insert(book.keys[b].end(), new_k.begin() + first, new_k.begin() + last);
    book.values[b].insert(book.values[b].end(), new_v.begin() + first, new_v.begin() + last);
    book.lens[b] = new_lens[b];
  }
  return ok;
}

// The attention call shared by prefill and decode: Q and O packed [tokens,
// heads_q, D] (for decode one token per sequence, which is also the dense
// [batch, 1, heads_q, D]); K and V read from the pages through the block
// table, seqused_k[b] keys per sequence.
flash::AttentionParams paged_params(const DeviceState& dev, const CacheBook& book) {
  flash::AttentionParams p;
  p.q = dev.q.ptr;
  p.k = dev.k_cache.ptr;
  p.v = dev.v_cache.ptr;
  p.o = dev.o.ptr;
  p.dtype = flash::DType::kBFloat16;
  p.batch = kNumSeqs;
  p.heads_q = kHeadsQ;
  p.heads_kv = kHeadsKv;
  p.head_dim = kHeadDim;
  p.seqlen_k = *std::max_element(book.lens.begin(), book.lens.end());  // the longest sequence
  // Q and O rows: one token after another, heads inside a token.
  p.q_batch_stride = p.q_seq_stride = p.o_batch_stride = p.o_seq_stride = kQRow;
  p.q_head_stride = p.o_head_stride = kHeadDim;
  // K and V: the batch stride is the stride between pages.
  p.k_batch_stride = p.v_batch_stride = static_cast<int64_t>(kPageSize) * kKvRow;
  p.k_seq_stride = p.v_seq_stride = kKvRow;
  p.k_head_stride = p.v_head_stride = kHeadDim;
  p.block_table = dev.block_table.ptr;
  p.block_table_batch_stride = kMaxPagesPerSeq;
  p.max_pages_per_seq = kMaxPagesPerSeq;
  p.page_size = kPageSize;
  p.num_pages = kNumPages;
  p.seqused_k = dev.seqused_k.ptr;
  // Bottom-right causal: the last query of a sequence sees all its keys. For
  // one query per sequence (decode) that is every key, so causal = true
  // serves both phases.
  p.causal = true;
  return p;
}

// Sizes the workspace for `p` (growing it when needed) and points p at it.
bool attach_workspace(DeviceState& dev, flash::AttentionParams* p, size_t* bytes) {
  if (!flash_ok(flash::attention_workspace_size(*p, bytes), "flash::attention_workspace_size")) return false;
  if (*bytes > dev.workspace.count && !dev.workspace.allocate(*bytes, "cudaMalloc(workspace)")) return false;
  p->workspace = dev.workspace.ptr;  // cudaMalloc returns 256-byte-aligned memory
  p->workspace_bytes = dev.workspace.count;
  return true;
}

// Copies the pool back and checks that every sequence's keys and values sit
// in the pages the block table names, in order.
bool check_cache(const DeviceState& dev, const CacheBook& book) {
  std::vector<bf16> k_pool, v_pool;
  const size_t pool_elems = static_cast<size_t>(kNumPages) * kPageSize * kKvRow;
  if (!dev.k_cache.download(&k_pool, pool_elems, "copy K cache") ||
      !dev.v_cache.download(&v_pool, pool_elems, "copy V cache")) {
    return false;
  }
  size_t mismatches = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    for (int j = 0; j < book.lens[b]; ++j) {
      const int page = book.block_table[b * kMaxPagesPerSeq + j / kPageSize];
      const size_t at = (static_cast<size_t>(page) * kPageSize + j % kPageSize) * kKvRow;
      for (int e = 0; e < kKvRow; ++e) {
        const size_t expect = static_cast<size_t>(j) * kKvRow + e;
        mismatches += __bfloat162float(k_pool[at + e]) != __bfloat162float(book.keys[b][expect]);
        mismatches += __bfloat162float(v_pool[at + e]) != __bfloat162float(book.values[b][expect]);
      }
    }
  }
  if (mismatches != 0) std::fprintf(stderr, "KV cache: %zu elements not where the block table says\n", mismatches);
  return mismatches == 0;
}

// O of query head h for query row i of sequence b, which has n_q new
// queries: float on the host, scale 1/sqrt(D), causal from the bottom-right
// (row i sees keys j <= i + len - n_q), query head h reading K/V head
// h / (heads_q / heads_kv).
void reference_row(const CacheBook& book, const bf16* q_row, int b, int i, int n_q, int h, float* out) {
  const int h_kv = h / (kHeadsQ / kHeadsKv);
  const int visible = i + book.lens[b] - n_q + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> scores(visible);
  float max_score = -INFINITY;
  for (int j = 0; j < visible; ++j) {
    const bf16* k = &book.keys[b][static_cast<size_t>(j) * kKvRow + h_kv * kHeadDim];
    float dot = 0.f;
    for (int d = 0; d < kHeadDim; ++d) dot += __bfloat162float(q_row[d]) * __bfloat162float(k[d]);
    scores[j] = dot * scale;
    max_score = std::max(max_score, scores[j]);
  }
  float sum = 0.f;
  for (float& s : scores) {
    s = std::exp(s - max_score);
    sum += s;
  }
  for (int d = 0; d < kHeadDim; ++d) out[d] = 0.f;
  for (int j = 0; j < visible; ++j) {
    const bf16* v = &book.values[b][static_cast<size_t>(j) * kKvRow + h_kv * kHeadDim];
    for (int d = 0; d < kHeadDim; ++d) out[d] += scores[j] / sum * __bfloat162float(v[d]);
  }
}

// Runs `p` on `stream`, copies O back and compares every row (tokens packed
// in sequence order, new_counts[b] queries for sequence b) with the host
// reference. Returns the largest absolute error, or -1 on a failure.
float run_and_check(const DeviceState& dev, const CacheBook& book, const flash::AttentionParams& p,
                    const std::vector<int>& new_counts, const std::vector<bf16>& h_q, cudaStream_t stream) {
  std::vector<bf16> h_o;
  if (!flash_ok(flash::attention_forward(p, stream), "flash::attention_forward") ||
      !cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(attention)") ||
      !dev.o.download(&h_o, h_q.size(), "copy O") || !check_cache(dev, book)) {
    return -1.f;
  }
  float max_err = 0.f;
  std::vector<float> expect(kHeadDim);
  size_t token = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    for (int i = 0; i < new_counts[b]; ++i, ++token) {
      for (int h = 0; h < kHeadsQ; ++h) {
        const size_t row = token * kQRow + static_cast<size_t>(h) * kHeadDim;
        reference_row(book, &h_q[row], b, i, new_counts[b], h, expect.data());
        for (int d = 0; d < kHeadDim; ++d) {
          max_err = std::max(max_err, std::fabs(__bfloat162float(h_o[row + d]) - expect[d]));
        }
      }
    }
  }
  return max_err;
}

// The kernel configuration flash runs for `p`, e.g. to log it.
std::string kernel_name(const flash::AttentionParams& p) {
  flash::KernelChoice choice;
  return flash::query_kernel_choice(p, &choice).ok() ? std::string(choice.name) : std::string("?");
}

}  // namespace

int main() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device; skipping\n");
    return 77;
  }

  // bf16 output keeps 8 significant bits: outputs of magnitude <= 1 round by
  // up to ~4e-3, and P is rounded to bf16 inside the kernel too.
  const float tolerance = 2e-2f;
  std::mt19937 rng(2024);
  CacheBook book(rng);
  DeviceState dev;
  cudaStream_t stream = nullptr;
  int total_prompt = 0;
  for (int n : kPromptLens) total_prompt += n;
  const size_t max_tokens = static_cast<size_t>(std::max(total_prompt, kNumSeqs));
  const size_t pool_elems = static_cast<size_t>(kNumPages) * kPageSize * kKvRow;
  bool ok = cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            dev.k_cache.allocate(pool_elems, "cudaMalloc(K cache)") &&
            dev.v_cache.allocate(pool_elems, "cudaMalloc(V cache)") &&
            dev.block_table.allocate(book.block_table.size(), "cudaMalloc(block table)") &&
            dev.seqused_k.allocate(kNumSeqs, "cudaMalloc(seqused_k)") &&
            dev.cache_len.allocate(kNumSeqs, "cudaMalloc(cache lengths)") &&
            dev.cu_new.allocate(kNumSeqs + 1, "cudaMalloc(cu_new)") &&
            dev.new_k.allocate(max_tokens * kKvRow, "cudaMalloc(new K)") &&
            dev.new_v.allocate(max_tokens * kKvRow, "cudaMalloc(new V)") &&
            dev.q.allocate(max_tokens * kQRow, "cudaMalloc(Q)") && dev.o.allocate(max_tokens * kQRow, "cudaMalloc(O)");
  float worst = 0.f;
  std::printf("flash %s: %d sequences, prompts %d %d %d %d, heads %d/%d, head_dim %d, %d pages of %d keys\n",
              flash::version(), kNumSeqs, kPromptLens[0], kPromptLens[1], kPromptLens[2], kPromptLens[3], kHeadsQ,
              kHeadsKv, kHeadDim, kNumPages, kPageSize);

  // ---- Prefill: all prompts in one varlen call. ----
  if (ok) {
    const std::vector<int> counts(std::begin(kPromptLens), std::end(kPromptLens));
    const std::vector<bf16> h_q = random_bf16(static_cast<size_t>(total_prompt) * kQRow, rng);
    const std::vector<bf16> h_k = random_bf16(static_cast<size_t>(total_prompt) * kKvRow, rng);
    const std::vector<bf16> h_v = random_bf16(static_cast<size_t>(total_prompt) * kKvRow, rng);
    std::vector<int32_t> cu_seqlens_q(kNumSeqs + 1, 0);
    for (int b = 0; b < kNumSeqs; ++b) cu_seqlens_q[b + 1] = cu_seqlens_q[b] + counts[b];
    DeviceArray<int32_t> d_cu_seqlens_q;
    ok = append(book, dev, counts, h_k, h_v, stream) &&
         d_cu_seqlens_q.allocate(cu_seqlens_q.size(), "cudaMalloc(cu_seqlens_q)") &&
         d_cu_seqlens_q.upload(cu_seqlens_q, stream, "copy cu_seqlens_q") && dev.q.upload(h_q, stream, "copy Q");
    flash::AttentionParams p = paged_params(dev, book);
    p.cu_seqlens_q = d_cu_seqlens_q.ptr;                           // Q and O packed by sequence
    p.seqlen_q = *std::max_element(counts.begin(), counts.end());  // the longest prompt
    size_t workspace_bytes = 0;
    ok = ok && attach_workspace(dev, &p, &workspace_bytes);
    const float err = ok ? run_and_check(dev, book, p, counts, h_q, stream) : -1.f;
    ok = ok && err >= 0.f;
    if (ok) {
      std::printf("prefill: %d tokens, kernel %s, workspace %zu bytes, max abs error %.3e\n", total_prompt,
                  kernel_name(p).c_str(), workspace_bytes, err);
      worst = std::max(worst, err);
    }
  }

  // ---- Decode: one new token per sequence per step. ----
  for (int step = 1; step <= kDecodeSteps && ok; ++step) {
    const std::vector<int> counts(kNumSeqs, 1);
    const std::vector<bf16> h_q = random_bf16(static_cast<size_t>(kNumSeqs) * kQRow, rng);
    const std::vector<bf16> h_k = random_bf16(static_cast<size_t>(kNumSeqs) * kKvRow, rng);
    const std::vector<bf16> h_v = random_bf16(static_cast<size_t>(kNumSeqs) * kKvRow, rng);
    ok = append(book, dev, counts, h_k, h_v, stream) && dev.q.upload(h_q, stream, "copy Q");
    flash::AttentionParams p = paged_params(dev, book);
    p.seqlen_q = 1;
    p.num_splits = 0;  // flash decides whether to split the keys (it may, with a workspace)
    size_t workspace_bytes = 0;
    ok = ok && attach_workspace(dev, &p, &workspace_bytes);
    const float err = ok ? run_and_check(dev, book, p, counts, h_q, stream) : -1.f;
    ok = ok && err >= 0.f;
    if (ok) {
      std::printf("decode step %d: lengths %d %d %d %d, kernel %s, workspace %zu bytes, max abs error %.3e\n", step,
                  book.lens[0], book.lens[1], book.lens[2], book.lens[3], kernel_name(p).c_str(), workspace_bytes, err);
      worst = std::max(worst, err);
    }
  }

  if (stream != nullptr) cudaStreamDestroy(stream);
  if (!ok) return 1;
  const bool pass = worst <= tolerance;
  std::printf("max abs error over all steps: %.3e (tolerance %.0e) -> %s\n", worst, tolerance, pass ? "OK" : "FAILED");
  return pass ? 0 : 1;
}
