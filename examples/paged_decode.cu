// paged_decode: the attention calls of an inference engine's generation
// loop, against a paged KV cache.
//
// Four sequences with prompts of 37, 300, 1000 and 5 tokens share one pool
// of K/V pages (16 keys each). Pages are handed out from a shuffled free
// list as sequences grow, so a sequence's pages are scattered through the
// pool; a block table maps each sequence's i-th page to its place in the
// pool. Then:
//
//   prefill  one varlen call for all prompts that appends their K/V rows
//            to the cache and attends: Q packed [total tokens, heads,
//            head_dim] with cu_seqlens_q, the new K/V rows packed the same
//            way with cu_seqlens_k_new, K/V read through the block table,
//            causal.
//   decode   8 steps; each call appends one new token's K/V per sequence
//            and attends with its one query, seqused_k = the lengths before
//            the step, split-KV chosen by flash (num_splits 0).
//
// Every call also applies the rotary embedding (GPT-NeoX / Llama pairs,
// all 128 columns) to Q and to the new keys at their positions, and needs
// a workspace of attention_workspace_size() bytes. flash writes the new
// rows into the pages; this program only keeps the book (which pages a
// sequence owns, the lengths) and hands flash the lengths before each call.
//
// After every call it copies the cache back, checks that each sequence's
// keys and values are where the block table says, and compares the output
// with a float computation on the host. bf16, heads_q 8, heads_kv 2 (GQA),
// head_dim 128.
//
// With --fp8 the pages hold e4m3 (one byte an element) and every K/V head
// has its own descale for K and for V: the cache stands for descale *
// e4m3. The descales are device pointers (a captured graph sees new
// values); flash stores each appended row as e4m3(x / descale), keys
// rotated first, and the host check expects exactly those bytes. Q and O
// stay bf16.
//
// Build: part of the flash CMake project (target paged_decode, links only
// flash::flash). Run: ./paged_decode [--fp8]
// Exit codes: 0 success, 1 an error or a result out of tolerance,
// 77 no CUDA device (the conventional "skipped" code of test drivers).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
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

// How the pages store K and V: bf16, or e4m3 with a descale for K and one
// for V per K/V head (--fp8; picked so the stored magnitudes reach 40-90,
// well inside e4m3's 448: values are within 1, rotated keys within about
// 1.41).
struct CacheFormat {
  bool fp8 = false;
  std::vector<float> k_descale = {1.f / 64, 1.f / 40};  // [heads_kv]
  std::vector<float> v_descale = {1.f / 48, 1.f / 56};
  size_t element_bytes() const { return fp8 ? 1 : 2; }
};
static_assert(kHeadsKv == 2, "one descale of each list per K/V head");

// The bytes flash stores for the value x of K/V head h (x as flash computes
// it: a key already rotated, in float32), appended to `bytes`; returns the
// value those bytes stand for. bf16: x rounded to bf16. e4m3: x / descale
// rounded to nearest and saturated at +-448, as flash rounds it.
float store(const CacheFormat& f, float x, float descale, std::vector<uint8_t>* bytes) {
  if (f.fp8) {
    const __nv_fp8_storage_t e = __nv_cvt_float_to_fp8(x / descale, __NV_SATFINITE, __NV_E4M3);
    bytes->push_back(static_cast<uint8_t>(e));
    return descale * __half2float(__half(__nv_cvt_fp8_to_halfraw(e, __NV_E4M3)));
  }
  const bf16 b = __float2bfloat16(x);
  uint8_t raw[sizeof(bf16)];
  std::memcpy(raw, &b, sizeof(bf16));
  bytes->insert(bytes->end(), raw, raw + sizeof(bf16));
  return __bfloat162float(b);
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

// The rotary embedding's tables, the layout flash takes: float32
// [kMaxSeqLen, kHeadDim / 2], position t turning column pair (j, j + 64) by
// t * 10000^(-2j / 128).
constexpr int kRotaryPairs = kHeadDim / 2;
struct RotaryTables {
  std::vector<float> cos, sin;
};
const RotaryTables& rotary_tables() {
  static const RotaryTables tables = [] {
    RotaryTables t;
    for (int pos = 0; pos < kMaxSeqLen; ++pos) {
      for (int j = 0; j < kRotaryPairs; ++j) {
        const double angle = pos * std::pow(10000.0, -2.0 * j / kHeadDim);
        t.cos.push_back(static_cast<float>(std::cos(angle)));
        t.sin.push_back(static_cast<float>(std::sin(angle)));
      }
    }
    return t;
  }();
  return tables;
}

// One row of a head ([kHeadDim]) rotated to `position` on the host as flash
// rotates it: in float32 from the same tables, each product rounded on its
// own (no fused multiply-add; `volatile` keeps the compiler from forming
// one). Flash then rounds each value once, to bf16 (Q, and a bf16 cache's
// keys) or to e4m3 after the descale (an fp8 cache's keys), so the keys
// compare bit for bit.
void rotate_row(const bf16* src, float* dst, int position) {
  const RotaryTables& t = rotary_tables();
  for (int j = 0; j < kRotaryPairs; ++j) {
    const float c = t.cos[static_cast<size_t>(position) * kRotaryPairs + j];
    const float s = t.sin[static_cast<size_t>(position) * kRotaryPairs + j];
    const float x0 = __bfloat162float(src[j]), x1 = __bfloat162float(src[j + kRotaryPairs]);
    const volatile float x0c = x0 * c, x1s = x1 * s, x0s = x0 * s, x1c = x1 * c;
    dst[j] = x0c - x1s;
    dst[j + kRotaryPairs] = x0s + x1c;
  }
}

// The host side of the cache: which pool pages are free, the block table,
// each sequence's length, and (for the checks) every K/V row appended so far
// in sequence order, keys rotated to their positions: the bytes flash should
// have stored, and the values they stand for.
struct CacheBook {
  std::vector<int32_t> free_pages;   // handed out from the back
  std::vector<int32_t> block_table;  // [kNumSeqs, kMaxPagesPerSeq]; unused entries 0 (never read)
  std::vector<int32_t> lens = std::vector<int32_t>(kNumSeqs, 0);
  std::vector<std::vector<uint8_t>> key_bytes = std::vector<std::vector<uint8_t>>(kNumSeqs);  // [len, heads_kv, D]
  std::vector<std::vector<uint8_t>> value_bytes = std::vector<std::vector<uint8_t>>(kNumSeqs);
  std::vector<std::vector<float>> keys = std::vector<std::vector<float>>(kNumSeqs);  // [len, heads_kv, D]
  std::vector<std::vector<float>> values = std::vector<std::vector<float>>(kNumSeqs);

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
  DeviceArray<uint8_t> k_cache, v_cache;      // [kNumPages, kPageSize, heads_kv, D] of bf16 or e4m3
  DeviceArray<float> k_descale, v_descale;    // [heads_kv] (--fp8)
  DeviceArray<int32_t> block_table;           // [kNumSeqs, kMaxPagesPerSeq]
  DeviceArray<int32_t> seqused_k;             // [kNumSeqs]: keys in the cache per sequence before a call
  DeviceArray<int32_t> cu_new;                // [kNumSeqs + 1]: new tokens per sequence, as offsets
  DeviceArray<bf16> new_k, new_v;             // [tokens, heads_kv, D]: rows to append
  DeviceArray<bf16> q, o;                     // [tokens, heads_q, D]
  DeviceArray<float> rotary_cos, rotary_sin;  // [kMaxSeqLen, kHeadDim / 2]
  DeviceArray<unsigned char> workspace;
};

std::vector<bf16> random_bf16(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<bf16> out(n);
  for (bf16& x : out) x = __float2bfloat16(uniform(rng));
  return out;
}

// What one call appends: new_counts[b] tokens for every sequence b, their
// K/V rows packed in sequence order ([tokens, heads_kv, D]).
struct Step {
  std::vector<int> new_counts;
  std::vector<int32_t> cu;  // row offsets of each sequence's new tokens
  std::vector<bf16> new_k, new_v;
  int longest_after = 0;  // the longest sequence after the call
};

// Before a call: pages for the new tokens (host), then the block table, the
// lengths before the call (seqused_k), the offsets and the new rows go to
// the device. flash writes the rows into their pages during the call.
bool stage(CacheBook& book, DeviceState& dev, Step& step, cudaStream_t stream) {
  step.cu.assign(kNumSeqs + 1, 0);
  step.longest_after = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    if (!book.reserve(b, book.lens[b] + step.new_counts[b])) return false;
    step.cu[b + 1] = step.cu[b] + step.new_counts[b];
    step.longest_after = std::max(step.longest_after, book.lens[b] + step.new_counts[b]);
  }
  const bool ok = dev.block_table.upload(book.block_table, stream, "copy block table") &&
                  dev.seqused_k.upload(book.lens, stream, "copy seqused_k") &&
                  dev.cu_new.upload(step.cu, stream, "copy cu_seqlens_k_new") &&
                  dev.new_k.upload(step.new_k, stream, "copy new K") &&
                  dev.new_v.upload(step.new_v, stream, "copy new V");
  // The host vectors must stay untouched until the copies are done.
  return ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(copies)");
}

// After a call: the host's record gains the new rows (keys rotated to their
// positions, as flash wrote them) and the new lengths. The engine's next
// call passes these lengths as its seqused_k.
void record(CacheBook& book, const Step& step, const CacheFormat& format) {
  std::vector<float> rotated(kHeadDim);
  for (int b = 0; b < kNumSeqs; ++b) {
    for (int t = 0; t < step.new_counts[b]; ++t) {
      const size_t row = static_cast<size_t>(step.cu[b] + t) * kKvRow;
      for (int h = 0; h < kHeadsKv; ++h) {
        rotate_row(&step.new_k[row + h * kHeadDim], rotated.data(), book.lens[b] + t);
        for (int d = 0; d < kHeadDim; ++d) {
          book.keys[b].push_back(store(format, rotated[d], format.k_descale[h], &book.key_bytes[b]));
          const float v = __bfloat162float(step.new_v[row + h * kHeadDim + d]);
          book.values[b].push_back(store(format, v, format.v_descale[h], &book.value_bytes[b]));
        }
      }
    }
    book.lens[b] += step.new_counts[b];
  }
}

// The attention call shared by prefill and decode: Q and O packed [tokens,
// heads_q, D] (for decode one token per sequence, which is also the dense
// [batch, 1, heads_q, D]); K and V read from the pages through the block
// table; the step's new rows appended at seqused_k[b] (the lengths before
// the call) and attended with the rest; Q and the new keys rotated.
flash::AttentionParams paged_params(const DeviceState& dev, const Step& step, const CacheFormat& format) {
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
  p.seqlen_k = step.longest_after;  // the longest sequence, its new rows included
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
  if (format.fp8) {
    // K = k_descale[h] * K_e4m3 for K/V head h (descale_head_stride 1), V alike.
    p.kv_dtype = flash::KvDType::kFloat8E4M3;
    p.k_descale = dev.k_descale.ptr;
    p.v_descale = dev.v_descale.ptr;
    p.descale_head_stride = 1;
  }
  p.seqused_k = dev.seqused_k.ptr;  // before the append; flash does not write it
  // The new rows, packed by sequence like Q.
  p.k_new = dev.new_k.ptr;
  p.v_new = dev.new_v.ptr;
  p.cu_seqlens_k_new = dev.cu_new.ptr;
  p.seqlen_new = *std::max_element(step.new_counts.begin(), step.new_counts.end());
  p.k_new_seq_stride = p.v_new_seq_stride = kKvRow;
  p.k_new_head_stride = p.v_new_head_stride = kHeadDim;
  p.k_new_batch_stride = p.v_new_batch_stride = 0;  // packed: unused
  p.rotary_cos = dev.rotary_cos.ptr;
  p.rotary_sin = dev.rotary_sin.ptr;
  p.rotary_dim = kHeadDim;
  p.rotary_positions = kMaxSeqLen;
  p.rotary_interleaved = false;  // pairs (j, j + 64), not (2j, 2j + 1)
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
// in the pages the block table names, in order, byte for byte.
bool check_cache(const DeviceState& dev, const CacheBook& book, const CacheFormat& format) {
  std::vector<uint8_t> k_pool, v_pool;
  const size_t eb = format.element_bytes();
  const size_t pool_bytes = static_cast<size_t>(kNumPages) * kPageSize * kKvRow * eb;
  if (!dev.k_cache.download(&k_pool, pool_bytes, "copy K cache") ||
      !dev.v_cache.download(&v_pool, pool_bytes, "copy V cache")) {
    return false;
  }
  size_t mismatches = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    for (int j = 0; j < book.lens[b]; ++j) {
      const int page = book.block_table[b * kMaxPagesPerSeq + j / kPageSize];
      const size_t at = (static_cast<size_t>(page) * kPageSize + j % kPageSize) * kKvRow * eb;
      const size_t expect = static_cast<size_t>(j) * kKvRow * eb;
      for (size_t e = 0; e < kKvRow * eb; e += eb) {
        mismatches += std::memcmp(&k_pool[at + e], &book.key_bytes[b][expect + e], eb) != 0;
        mismatches += std::memcmp(&v_pool[at + e], &book.value_bytes[b][expect + e], eb) != 0;
      }
    }
  }
  if (mismatches != 0) std::fprintf(stderr, "KV cache: %zu elements not where the block table says\n", mismatches);
  return mismatches == 0;
}

// O of query head h for query row i of sequence b, which has n_q new
// queries: float on the host over the values the cache stands for, scale
// 1/sqrt(D), causal from the bottom-right (row i sees keys
// j <= i + len - n_q), query head h reading K/V head h / (heads_q / heads_kv).
void reference_row(const CacheBook& book, const bf16* q_row, int b, int i, int n_q, int h, float* out) {
  const int h_kv = h / (kHeadsQ / kHeadsKv);
  const int visible = i + book.lens[b] - n_q + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> scores(visible);
  float max_score = -INFINITY;
  for (int j = 0; j < visible; ++j) {
    const float* k = &book.keys[b][static_cast<size_t>(j) * kKvRow + h_kv * kHeadDim];
    float dot = 0.f;
    for (int d = 0; d < kHeadDim; ++d) dot += __bfloat162float(q_row[d]) * k[d];
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
    const float* v = &book.values[b][static_cast<size_t>(j) * kKvRow + h_kv * kHeadDim];
    for (int d = 0; d < kHeadDim; ++d) out[d] += scores[j] / sum * v[d];
  }
}

// Runs `p` (which appends `step`) on `stream`, records the step in the
// book, copies O back and compares every row (tokens packed in sequence
// order, new_counts[b] queries for sequence b, each rotated to its
// position) with the host reference. Returns the largest absolute error,
// or -1 on a failure.
float run_and_check(const DeviceState& dev, CacheBook& book, const CacheFormat& format, const flash::AttentionParams& p,
                    const Step& step, const std::vector<bf16>& h_q, cudaStream_t stream) {
  std::vector<bf16> h_o;
  if (!flash_ok(flash::attention_forward(p, stream), "flash::attention_forward") ||
      !cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize(attention)")) {
    return -1.f;
  }
  record(book, step, format);
  if (!dev.o.download(&h_o, h_q.size(), "copy O") || !check_cache(dev, book, format)) return -1.f;
  float max_err = 0.f;
  std::vector<float> expect(kHeadDim), rotated(kHeadDim);
  std::vector<bf16> q_rotated(kHeadDim);
  size_t token = 0;
  for (int b = 0; b < kNumSeqs; ++b) {
    const int n_q = step.new_counts[b];
    for (int i = 0; i < n_q; ++i, ++token) {
      for (int h = 0; h < kHeadsQ; ++h) {
        const size_t row = token * kQRow + static_cast<size_t>(h) * kHeadDim;
        rotate_row(&h_q[row], rotated.data(), book.lens[b] - n_q + i);  // the query's position, rounded to bf16
        for (int d = 0; d < kHeadDim; ++d) q_rotated[d] = __float2bfloat16(rotated[d]);
        reference_row(book, q_rotated.data(), b, i, n_q, h, expect.data());
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

int main(int argc, char** argv) {
  CacheFormat format;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--fp8") == 0) {
      format.fp8 = true;
    } else {
      std::fprintf(stderr, "usage: %s [--fp8]\n", argv[0]);
      return 1;
    }
  }
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device; skipping\n");
    return 77;
  }

  // bf16 output keeps 8 significant bits: outputs of magnitude <= 1 round by
  // up to ~4e-3, and P is rounded to bf16 (or fp16) inside the kernel too.
  // The reference computes on the values an fp8 cache stands for, so e4m3's
  // own rounding is not in the error.
  const float tolerance = 2e-2f;
  std::mt19937 rng(2024);
  CacheBook book(rng);
  DeviceState dev;
  cudaStream_t stream = nullptr;
  int total_prompt = 0;
  for (int n : kPromptLens) total_prompt += n;
  const size_t max_tokens = static_cast<size_t>(std::max(total_prompt, kNumSeqs));
  const size_t pool_bytes = static_cast<size_t>(kNumPages) * kPageSize * kKvRow * format.element_bytes();
  bool ok = cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
            dev.k_cache.allocate(pool_bytes, "cudaMalloc(K cache)") &&
            dev.v_cache.allocate(pool_bytes, "cudaMalloc(V cache)") &&
            dev.block_table.allocate(book.block_table.size(), "cudaMalloc(block table)") &&
            dev.seqused_k.allocate(kNumSeqs, "cudaMalloc(seqused_k)") &&
            dev.cu_new.allocate(kNumSeqs + 1, "cudaMalloc(cu_new)") &&
            dev.new_k.allocate(max_tokens * kKvRow, "cudaMalloc(new K)") &&
            dev.new_v.allocate(max_tokens * kKvRow, "cudaMalloc(new V)") &&
            dev.q.allocate(max_tokens * kQRow, "cudaMalloc(Q)") && dev.o.allocate(max_tokens * kQRow, "cudaMalloc(O)");
  // check_cache reads the whole pools back; zeroing them gives the pages no
  // sequence has written defined bytes (compute-sanitizer's initcheck).
  ok = ok && cuda_ok(cudaMemsetAsync(dev.k_cache.ptr, 0, pool_bytes, stream), "cudaMemset(K cache)") &&
       cuda_ok(cudaMemsetAsync(dev.v_cache.ptr, 0, pool_bytes, stream), "cudaMemset(V cache)");
  // The rotary tables, once (the host keeps them for its checks).
  const RotaryTables& tables = rotary_tables();
  ok = ok && dev.rotary_cos.allocate(tables.cos.size(), "cudaMalloc(rotary_cos)") &&
       dev.rotary_sin.allocate(tables.sin.size(), "cudaMalloc(rotary_sin)") &&
       dev.rotary_cos.upload(tables.cos, stream, "copy rotary_cos") &&
       dev.rotary_sin.upload(tables.sin, stream, "copy rotary_sin");
  // The descales, once; an engine may change them between calls (flash
  // reads them on the device), rows already stored keep their old meaning.
  if (format.fp8) {
    ok = ok && dev.k_descale.allocate(kHeadsKv, "cudaMalloc(k_descale)") &&
         dev.v_descale.allocate(kHeadsKv, "cudaMalloc(v_descale)") &&
         dev.k_descale.upload(format.k_descale, stream, "copy k_descale") &&
         dev.v_descale.upload(format.v_descale, stream, "copy v_descale");
  }
  float worst = 0.f;
  std::printf("flash %s: %d sequences, prompts %d %d %d %d, heads %d/%d, head_dim %d, %d pages of %d keys, %s cache\n",
              flash::version(), kNumSeqs, kPromptLens[0], kPromptLens[1], kPromptLens[2], kPromptLens[3], kHeadsQ,
              kHeadsKv, kHeadDim, kNumPages, kPageSize, format.fp8 ? "e4m3" : "bf16");

  // ---- Prefill: all prompts in one varlen call that appends them. ----
  if (ok) {
    Step step;
    step.new_counts.assign(std::begin(kPromptLens), std::end(kPromptLens));
    const std::vector<bf16> h_q = random_bf16(static_cast<size_t>(total_prompt) * kQRow, rng);
    step.new_k = random_bf16(static_cast<size_t>(total_prompt) * kKvRow, rng);
    step.new_v = random_bf16(static_cast<size_t>(total_prompt) * kKvRow, rng);
    ok = stage(book, dev, step, stream) && dev.q.upload(h_q, stream, "copy Q");
    flash::AttentionParams p = paged_params(dev, step, format);
    p.cu_seqlens_q = dev.cu_new.ptr;  // Q and O packed by sequence: the queries are the new tokens
    p.seqlen_q = p.seqlen_new;        // the longest prompt
    p.total_q = total_prompt;         // Q's rows (the rotated copy's size; lets the Hopper kernel run)
    size_t workspace_bytes = 0;
    ok = ok && attach_workspace(dev, &p, &workspace_bytes);
    const float err = ok ? run_and_check(dev, book, format, p, step, h_q, stream) : -1.f;
    ok = ok && err >= 0.f;
    if (ok) {
      std::printf("prefill: %d tokens, kernel %s, workspace %zu bytes, max abs error %.3e\n", total_prompt,
                  kernel_name(p).c_str(), workspace_bytes, err);
      worst = std::max(worst, err);
    }
  }

  // ---- Decode: one new token per sequence per step. ----
  for (int i = 1; i <= kDecodeSteps && ok; ++i) {
    Step step;
    step.new_counts.assign(kNumSeqs, 1);
    const std::vector<bf16> h_q = random_bf16(static_cast<size_t>(kNumSeqs) * kQRow, rng);
    step.new_k = random_bf16(static_cast<size_t>(kNumSeqs) * kKvRow, rng);
    step.new_v = random_bf16(static_cast<size_t>(kNumSeqs) * kKvRow, rng);
    ok = stage(book, dev, step, stream) && dev.q.upload(h_q, stream, "copy Q");
    flash::AttentionParams p = paged_params(dev, step, format);
    p.seqlen_q = 1;
    p.num_splits = 0;  // flash decides whether to split the keys (it may, with a workspace)
    size_t workspace_bytes = 0;
    ok = ok && attach_workspace(dev, &p, &workspace_bytes);
    const float err = ok ? run_and_check(dev, book, format, p, step, h_q, stream) : -1.f;
    ok = ok && err >= 0.f;
    if (ok) {
      std::printf("decode step %d: lengths %d %d %d %d, kernel %s, workspace %zu bytes, max abs error %.3e\n", i,
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
