// Fuzz test of the argument checks, built with ASan and UBSan (its own
// executable: tests/CMakeLists.txt compiles the library's host sources into
// it instrumented). Fixed seed, a fixed number of cases, a few seconds.
//
// The model of validity is written from the comments of flash/flash.hpp,
// not from src/validate.cpp: make_valid() builds a call every documented
// rule allows (fake pointers, each tensor and array in its own 1 TiB
// region), and each Violation breaks exactly one documented rule and says
// which code and which word the rejection must carry. Garbage cases fill
// the fields with extreme values and random bytes (the C struct's enum and
// bool fields included) and only the invariants apply:
//   - nothing crashes and the sanitizers stay quiet;
//   - a rejection has a message, a success none;
//   - validate() rejects <=> attention_forward() returns kInvalidArgument,
//     with the same message (with a GPU present, attention_forward runs only
//     on calls validate() rejects or that do no work, which launch nothing);
//   - the C API returns what the C++ API returns, with the same message.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cfloat>
#include <cmath>
#include <algorithm>
#include <vector>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "flash/flash.h"
#include "flash/flash.hpp"

// The sanitizers' defaults for this executable: protect_shadow_gap=0 lets
// the CUDA driver map its memory on a machine with a GPU; leaks are not what
// this test looks for.
extern "C" const char* __asan_default_options() { return "protect_shadow_gap=0:detect_leaks=0"; }
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1"; }

namespace {

using flash::AttentionParams;
using flash::Backend;
using flash::DType;
using flash::KvDType;
using flash::Status;
using flash::StatusCode;

constexpr uint64_t kSeed = 0x5eed2024;
constexpr int kCases = 300000;
constexpr int64_t kHeadDims[] = {8, 32, 40, 64, 80, 96, 112, 128, 160, 192, 224, 256};
// Head dims an fp8 cache takes: multiples of 16.
constexpr int64_t kFp8HeadDims[] = {16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256};

// Regions of fake device memory, 1 TiB apart; nothing is ever dereferenced.
enum Region {
  kQ, kK, kV, kO, kLse, kCuQ, kCuK, kUsed, kTable, kWorkspace, kKNew, kVNew, kCuNew, kRotary, kKDescale, kVDescale,
  kRegions
};
uintptr_t region_base(int r) { return (uintptr_t{1} << 40) * static_cast<uintptr_t>(r + 1); }

// The split workspace's row width for head dim d: the smallest compiled head
// dim at least d, or, where the Hopper kernel may run the call (a build with
// it, Backend::kAuto or kSm90), the smallest compiled one of 64, 96, 128,
// 192, 256 at least d when that is wider (the FLASH_HAS_HEAD_DIM_* macros and
// FLASH_HAS_SM90 are the library's, which this binary is compiled with).
// A call on an fp8 cache (`fp8`) has the width of its kernels (decode and
// sm90), the smallest compiled multiple of 64 at least d.
int64_t workspace_width(int64_t d, Backend backend, bool fp8) {
  std::vector<int64_t> dims;
#if FLASH_HAS_HEAD_DIM_32
  dims.push_back(32);
#endif
#if FLASH_HAS_HEAD_DIM_64
  dims.push_back(64);
#endif
#if FLASH_HAS_HEAD_DIM_96
  dims.push_back(96);
#endif
#if FLASH_HAS_HEAD_DIM_128
  dims.push_back(128);
#endif
#if FLASH_HAS_HEAD_DIM_192
  dims.push_back(192);
#endif
#if FLASH_HAS_HEAD_DIM_256
  dims.push_back(256);
#endif
  int64_t any = 0, sm90 = 0, fp8_dim = 0;
  for (int64_t c : dims) {
    if (c < d) continue;
    if (any == 0) any = c;
    if (sm90 == 0 && (c % 64 == 0 || c == 96)) sm90 = c;
    if (fp8_dim == 0 && c % 64 == 0) fp8_dim = c;
  }
  if (fp8) return std::max(any, fp8_dim);
  const bool hopper = FLASH_HAS_SM90 && (backend == Backend::kAuto || backend == Backend::kSm90);
  return hopper ? std::max(any, sm90) : any;
}

class Fuzzer {
 public:
  explicit Fuzzer(uint64_t seed) : rng_(seed) {}

  int64_t range(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(rng_); }
  template <typename T, size_t N>
  T pick(const T (&values)[N]) {
    return values[range(0, N - 1)];
  }

  // An int64 from a heavy-tailed mix: small, near powers of two, extremes.
  int64_t any_int() {
    switch (range(0, 5)) {
      case 0: return range(-2, 300);
      case 1: {
        const int64_t p = int64_t{1} << range(0, 62);
        return p + range(-1, 1);
      }
      case 2: return -(int64_t{1} << range(0, 62)) + range(-1, 1);
      case 3: return pick({INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, int64_t{0}, int64_t{-1}});
      case 4: return static_cast<int64_t>(rng_());
      default: return range(0, 8) * 8;
    }
  }
  float any_float() {
    switch (range(0, 3)) {
      case 0: return pick({0.f, -0.f, 1.f, -1.f, 1e-6f, 1e6f, 1e24f, 3e24f, FLT_MAX, FLT_MIN, FLT_TRUE_MIN, INFINITY,
                           -INFINITY, NAN, 0.125f, 50.f});
      case 1: return std::ldexp(1.f, static_cast<int>(range(-150, 130)));
      default: {
        const uint32_t bits = static_cast<uint32_t>(rng_());
        float f;
        std::memcpy(&f, &bits, sizeof(f));
        return f;
      }
    }
  }
  const void* any_ptr(int region) {
    switch (range(0, 4)) {
      case 0: return nullptr;
      case 1: return reinterpret_cast<const void*>(region_base(region) + static_cast<uintptr_t>(range(0, 64)));
      case 2: return reinterpret_cast<const void*>(static_cast<uintptr_t>(rng_()));
      case 3: return reinterpret_cast<const void*>(region_base(static_cast<int>(range(0, kRegions - 1))) +
                                                   16 * static_cast<uintptr_t>(range(0, 4096)));
      default: return reinterpret_cast<const void*>(region_base(region));
    }
  }

  std::mt19937_64 rng_;
};

template <typename T>
T* at(int region, int64_t offset) {
  return reinterpret_cast<T*>(region_base(region) + static_cast<uintptr_t>(offset));
}

// Strides of a tensor of `seq` rows and `heads` heads: dense or padded (by
// multiples of `granule` elements: 8, 16 for an fp8 cache's 16-byte rows),
// in [B, N, H, D] or [B, H, N, D] order; rows never overlap.
void fill_strides(Fuzzer& f, int64_t seq, int64_t heads, int64_t head_dim, int64_t* batch_stride,
                  int64_t* seq_stride, int64_t* head_stride, int64_t granule = 8) {
  const bool bhnd = f.coin();
  const int64_t inner = head_dim + (f.coin(0.3) ? granule * f.range(1, 4) : 0);
  if (bhnd) {
    *seq_stride = inner;
    *head_stride = seq * inner + (f.coin(0.3) ? granule * f.range(1, 4) : 0);
    *batch_stride = heads * *head_stride + (f.coin(0.3) ? granule * f.range(1, 4) : 0);
  } else {
    *head_stride = inner;
    *seq_stride = heads * inner + (f.coin(0.3) ? granule * f.range(1, 4) : 0);
    *batch_stride = seq * *seq_stride + (f.coin(0.3) ? granule * f.range(1, 4) : 0);
  }
}

// The workspace of a call by the documented rules: the append's lengths
// and rotated Q (each rounded up to 256 bytes), then n splits' rows of
// W + 1 floats. `required`: what validate() demands (n = num_splits when
// above 1, else no rows); otherwise room for one split's rows at least.
size_t model_workspace(const AttentionParams& p, bool required = false) {
  auto round256 = [](int64_t n) { return (n + 255) / 256 * 256; };
  const int64_t dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  int64_t bytes = 0;
  if (p.k_new != nullptr) {
    bytes += round256(p.batch * 4);
    if (p.rotary_cos != nullptr) {
      const int64_t q_rows = p.cu_seqlens_q != nullptr ? p.total_q : p.batch * p.seqlen_q;
      bytes += round256(q_rows * p.heads_q * p.head_dim * 2);
    }
  }
  const int64_t n = p.num_splits > 1 ? p.num_splits : (required ? 0 : 1);
  const bool fp8 = p.kv_dtype == KvDType::kFloat8E4M3;
  bytes += n * p.batch * p.heads_q * p.seqlen_q * (workspace_width(std::max(p.head_dim, dv), p.backend, fp8) + 1) * 4;
  return static_cast<size_t>(bytes);
}

// A call every documented rule allows.
AttentionParams make_valid(Fuzzer& f) {
  AttentionParams p;
  p.dtype = f.coin() ? DType::kFloat16 : DType::kBFloat16;
  // An fp8 cache: head dims multiples of 16, K/V strides multiples of 16
  // elements, the decode kernel (kAuto or kDecode).
  const bool fp8 = f.coin(0.25);
  p.backend = fp8 ? (f.coin() ? Backend::kAuto : Backend::kDecode) : static_cast<Backend>(f.range(0, 3));
  p.batch = f.range(1, 6);
  p.seqlen_q = f.coin(0.3) ? f.range(1, 16) : f.range(1, 400);
  p.seqlen_k = f.range(1, 600);
  p.heads_kv = f.range(1, 4);
  p.heads_q = p.heads_kv * f.pick({int64_t{1}, int64_t{2}, int64_t{4}, int64_t{8}});
  p.head_dim = fp8 ? f.pick(kFp8HeadDims) : f.pick(kHeadDims);
  p.head_dim_v = f.coin(0.7) ? 0 : (fp8 ? f.pick(kFp8HeadDims) : f.pick(kHeadDims));
  if (fp8) {
    p.kv_dtype = KvDType::kFloat8E4M3;
    // Device float32, null meaning 1: one factor, or one per K/V head.
    p.descale_head_stride = f.range(0, 1);
    if (f.coin(0.7)) p.k_descale = at<const float>(kKDescale, 4 * f.range(0, 100));
    if (f.coin(0.7)) p.v_descale = at<const float>(kVDescale, 4 * f.range(0, 100));
  }
  const int64_t kv_granule = fp8 ? 16 : 8;
  const int64_t dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  const int64_t offsets = 256 * f.range(0, 4096);  // within each region, 256-byte aligned
  p.q = at<const void>(kQ, offsets);
  p.k = at<const void>(kK, offsets);
  p.v = at<const void>(kV, offsets);
  p.o = at<void>(kO, offsets);
  p.lse = f.coin() ? at<float>(kLse, 4 * f.range(0, 1000)) : nullptr;
  p.causal = f.coin();
  p.softmax_scale = f.pick({0.f, 0.125f, 1.f, 1e-30f, 1e24f, 37.5f});
  p.softcap = f.coin(0.7) ? 0.f : f.pick({1e-6f, 30.f, 50.f, 1e6f});
  p.window_left = f.coin(0.7) ? -1 : f.range(0, 1000);
  p.window_right = p.causal ? f.range(-1, 0) : (f.coin(0.7) ? -1 : f.range(0, 1000));
  p.autotune = false;

  // Variable-length queries and keys; a paged cache (not with varlen keys).
  if (f.coin(0.3)) {
    p.cu_seqlens_q = at<const int32_t>(kCuQ, 4 * f.range(0, 100));
    p.total_q = f.coin() ? 0 : f.range(1, 2000);
  }
  const int mode = static_cast<int>(f.range(0, 2));  // 0 dense K/V, 1 varlen K/V, 2 paged
  if (mode == 1) {
    p.cu_seqlens_k = at<const int32_t>(kCuK, 4 * f.range(0, 100));
    p.total_k = f.coin() ? 0 : f.range(1, 2000);
  }
  if (f.coin(0.3)) p.seqused_k = at<const int32_t>(kUsed, 4 * f.range(0, 100));
  const int64_t q_rows = p.cu_seqlens_q != nullptr && p.total_q > 0 ? p.total_q : p.seqlen_q;
  fill_strides(f, q_rows, p.heads_q, p.head_dim, &p.q_batch_stride, &p.q_seq_stride, &p.q_head_stride);
  fill_strides(f, q_rows, p.heads_q, dv, &p.o_batch_stride, &p.o_seq_stride, &p.o_head_stride);
  int64_t kv_rows = mode == 1 && p.total_k > 0 ? p.total_k : p.seqlen_k;
  if (mode == 2) {
    p.block_table = at<const int32_t>(kTable, 4 * f.range(0, 100));
    p.page_size = f.coin() ? 16 * f.range(1, 16) : f.range(1, 40);
    p.max_pages_per_seq = (p.seqlen_k + p.page_size - 1) / p.page_size + f.range(0, 3);
    p.block_table_batch_stride = p.max_pages_per_seq + f.range(0, 5);
    p.num_pages = f.range(1, 100);
    kv_rows = p.page_size;
  }
  fill_strides(f, kv_rows, p.heads_kv, p.head_dim, &p.k_batch_stride, &p.k_seq_stride, &p.k_head_stride, kv_granule);
  fill_strides(f, kv_rows, p.heads_kv, dv, &p.v_batch_stride, &p.v_seq_stride, &p.v_head_stride, kv_granule);

  // Append and attend (not with varlen K): new rows, seqused_k, rotary.
  if (mode != 1 && f.coin(0.2)) {
    if (p.seqused_k == nullptr) p.seqused_k = at<const int32_t>(kUsed, 4 * f.range(0, 100));
    p.k_new = at<const void>(kKNew, 256 * f.range(0, 100));
    p.v_new = at<const void>(kVNew, 256 * f.range(0, 100));
    p.seqlen_new = f.range(1, 64);
    if (f.coin(0.3)) p.cu_seqlens_k_new = at<const int32_t>(kCuNew, 4 * f.range(0, 100));
    fill_strides(f, p.seqlen_new, p.heads_kv, p.head_dim, &p.k_new_batch_stride, &p.k_new_seq_stride,
                 &p.k_new_head_stride);
    fill_strides(f, p.seqlen_new, p.heads_kv, dv, &p.v_new_batch_stride, &p.v_new_seq_stride, &p.v_new_head_stride);
    // Rotary writes the rotated Q to the workspace: packed Q needs total_q.
    if (f.coin() && (p.cu_seqlens_q == nullptr || p.total_q > 0)) {
      p.rotary_cos = at<const float>(kRotary, 4 * f.range(0, 100));
      p.rotary_sin = at<const float>(kRotary, (int64_t{1} << 32) + 4 * f.range(0, 100));
      p.rotary_dim = 2 * f.range(1, p.head_dim / 2);
      p.rotary_positions = f.range(1, 5000);
      p.rotary_interleaved = f.coin();
    }
  }

  // Split-KV: n > 1 needs n * batch * heads_q * seqlen_q * (W + 1) * 4 bytes,
  // W the row width of workspace_width(), after the append's bytes.
  switch (f.range(0, 3)) {
    case 0: p.num_splits = 0; break;
    case 1: p.num_splits = 1; break;
    default: p.num_splits = static_cast<int32_t>(f.range(2, 128)); break;
  }
  if (p.num_splits > 1 || p.k_new != nullptr || f.coin(0.3)) {
    p.workspace = at<void>(kWorkspace, 256 * f.range(0, 100));
    p.workspace_bytes = model_workspace(p) + static_cast<size_t>(f.range(0, 1) * 256);
  }
  return p;
}

// The fp8 cache's rules the Violations below break (the extent cases: keep
// or break), each counted so the test can tell it was exercised.
enum Fp8Rule {
  kUnknownKvDType,
  kDescaleWithoutFp8,
  kDescaleStride,
  kDescaleAligned,
  kFp8HeadDim,
  kFp8KvStride,
  kFp8Append,
  kFp8Backend,
  kFp8PastExtent,
  kFp8OnExtent,
  kFp8Rules
};
const char* const kFp8RuleNames[kFp8Rules] = {"unknown kv_dtype",
                                              "descale with kv_dtype kSame",
                                              "descale_head_stride not 0 or 1",
                                              "misaligned descale",
                                              "fp8 head dim not a multiple of 16",
                                              "fp8 K/V stride not a multiple of 16",
                                              "fp8 append's descale inside the cache",
                                              "fp8 on Backend::kSm80",
                                              "O right past an fp8 K/V's bytes",
                                              "O on an fp8 K/V's last bytes"};

// One documented rule broken: the code and a word the message must carry.
struct Expectation {
  StatusCode code;
  const char* word;   // null: any message
  int fp8_rule = -1;  // the Fp8Rule this case exercises, or -1
};

// One of Q, K and V, at random.
const void* input(Fuzzer& f, const AttentionParams& p) {
  switch (f.range(0, 2)) {
    case 0: return p.q;
    case 1: return p.k;
    default: return p.v;
  }
}

Expectation violate(Fuzzer& f, AttentionParams* pp) {
  AttentionParams& p = *pp;
  const bool fp8 = p.kv_dtype == KvDType::kFloat8E4M3;
  const int64_t dv = p.head_dim_v != 0 ? p.head_dim_v : p.head_dim;
  switch (f.range(0, 32)) {
    case 0: {
      const int32_t bad = static_cast<int32_t>(f.coin() ? f.range(2, 1000) : f.range(INT32_MIN, -1));
      p.dtype = static_cast<DType>(bad);
      return {StatusCode::kInvalidArgument, "dtype"};
    }
    case 1: {
      const int32_t bad = static_cast<int32_t>(f.coin() ? f.range(4, 1000) : f.range(INT32_MIN, -1));
      p.backend = static_cast<Backend>(bad);
      return {StatusCode::kInvalidArgument, "backend"};
    }
    case 2: p.batch = -f.range(1, INT64_MAX); return {StatusCode::kInvalidArgument, "batch"};
    case 3: p.seqlen_q = -f.range(1, INT64_MAX); return {StatusCode::kInvalidArgument, "seqlen_q"};
    case 4: p.seqlen_k = -f.range(1, INT64_MAX); return {StatusCode::kInvalidArgument, "seqlen_k"};
    case 5: {
      int64_t hd = f.range(-5, 600);
      // Neither a multiple of 8 from 8 to 256 nor 512 (which takes head_dim_v 0).
      while ((hd >= 8 && hd <= 256 && hd % 8 == 0) || hd == 512) ++hd;
      p.head_dim = hd;
      return {StatusCode::kInvalidArgument, "head_dim"};
    }
    case 28:
      // An append's own rules.
      if (p.k_new == nullptr) return {StatusCode::kSuccess, nullptr};
      switch (f.range(0, 3)) {
        case 0: p.seqused_k = nullptr; return {StatusCode::kInvalidArgument, "seqused_k"};
        case 1: p.workspace_bytes = static_cast<size_t>(f.range(0, static_cast<int64_t>(model_workspace(p, true)) - 1));
                return {StatusCode::kInvalidArgument, "workspace"};
        case 2: p.v_new = nullptr; return {StatusCode::kInvalidArgument, "k_new and v_new"};
        default:
          if (p.rotary_cos == nullptr) return {StatusCode::kSuccess, nullptr};
          p.rotary_dim = f.coin() ? p.head_dim + 2 * f.range(1, 8) : 2 * f.range(0, p.head_dim / 2) + 1;
          return {StatusCode::kInvalidArgument, "rotary_dim"};
      }
    case 27: {
      int64_t hd = f.range(-5, 600);
      while (hd == 0 || (hd >= 8 && hd <= 256 && hd % 8 == 0)) ++hd;  // neither 0 nor a multiple of 8 from 8 to 256
      p.head_dim_v = hd;
      return {StatusCode::kInvalidArgument, "head_dim_v"};
    }
    case 6:
      p.heads_kv = 3;
      p.heads_q = 3 * f.range(0, 10) + f.range(1, 2);
      return {StatusCode::kInvalidArgument, "heads"};
    case 7:
      (f.coin() ? p.q_dim_stride : p.o_dim_stride) = f.coin() ? 0 : f.range(2, 100);
      return {StatusCode::kInvalidArgument, "dim_stride"};
    case 8:
      p.softmax_scale = f.pick({-1.f, -FLT_MIN, NAN, INFINITY, FLT_MAX, 1e30f, 2e24f});
      return {StatusCode::kInvalidArgument, "softmax_scale"};
    case 9:
      p.softcap = f.pick({-1.f, 1e-7f, NAN, INFINITY, 3e38f, 1e30f, 1.1e6f});
      return {StatusCode::kInvalidArgument, "softcap"};
    case 10:
      (f.coin() ? p.window_left : p.window_right) = -f.range(2, INT64_MAX);
      return {StatusCode::kInvalidArgument, "window"};
    case 11:
      p.causal = true;
      p.window_right = f.range(1, 1000);
      return {StatusCode::kInvalidArgument, "window_right"};
    case 12:
      p.num_splits = f.coin() ? static_cast<int32_t>(f.range(INT32_MIN, -1)) : static_cast<int32_t>(f.range(129, INT32_MAX));
      return {StatusCode::kInvalidArgument, "num_splits"};
    case 13:
      p.workspace = at<void>(kWorkspace, f.range(1, 255));
      return {StatusCode::kInvalidArgument, "workspace"};
    case 14: {
      // Alignment is checked before what the arrays mean, so any of them will do.
      const int which = static_cast<int>(f.range(0, 3));
      const int32_t* bad = at<const int32_t>(kCuQ + which, f.range(0, 100) * 4 + f.range(1, 3));
      const int32_t** fields[] = {&p.cu_seqlens_q, &p.cu_seqlens_k, &p.seqused_k, &p.block_table};
      const char* names[] = {"cu_seqlens_q", "cu_seqlens_k", "seqused_k", "block_table"};
      *fields[which] = bad;
      return {StatusCode::kInvalidArgument, names[which]};
    }
    case 15:
      switch (f.range(0, 3)) {
        case 0: p.q = nullptr; break;
        case 1: p.k = nullptr; break;
        case 2: p.v = nullptr; break;
        default: p.o = nullptr; break;
      }
      return {StatusCode::kInvalidArgument, "is null"};
    case 16: {
      p.q = static_cast<const char*>(p.q) + f.range(1, 15);
      return {StatusCode::kInvalidArgument, "aligned"};
    }
    case 17: {
      int64_t* strides[] = {&p.q_seq_stride, &p.k_head_stride, &p.v_seq_stride, &p.o_head_stride};
      int64_t& s = *strides[f.range(0, 3)];
      s = f.coin() ? -8 * f.range(1, 100) : s + f.range(1, 7);
      return {StatusCode::kInvalidArgument, "stride"};
    }
    case 18: {
      // Inside the input's first row, which every valid call has (V's is Dv
      // wide; an fp8 cache's K and V rows have one byte an element).
      const int which = static_cast<int>(f.range(0, 2));
      const void* const inputs[] = {p.q, p.k, p.v};
      const int64_t row_bytes = (which == 2 ? dv : p.head_dim) * (which > 0 && fp8 ? 1 : 2);
      p.o = const_cast<char*>(static_cast<const char*>(inputs[which])) + 16 * f.range(0, row_bytes / 16 - 1);
      return {StatusCode::kInvalidArgument, "overlaps"};
    }
    case 19:
      if (p.lse == nullptr || (p.cu_seqlens_q != nullptr && p.total_q == 0)) return {StatusCode::kSuccess, nullptr};
      p.lse = static_cast<float*>(const_cast<void*>(input(f, p)));
      return {StatusCode::kInvalidArgument, "lse overlaps"};
    case 20:
      if (p.num_splits <= 1) return {StatusCode::kSuccess, nullptr};
      p.workspace_bytes = f.coin() ? 0 : static_cast<size_t>(f.range(0, static_cast<int64_t>(model_workspace(p, true)) - 1));
      if (f.coin(0.2)) p.workspace = nullptr;
      return {StatusCode::kInvalidArgument, "workspace"};
    case 21:
      if (p.block_table == nullptr) return {StatusCode::kSuccess, nullptr};
      switch (f.range(0, 4)) {
        case 0: p.page_size = -f.range(0, 160); return {StatusCode::kInvalidArgument, "page_size"};
        case 1: p.num_pages = -f.range(0, 10); return {StatusCode::kInvalidArgument, "num_pages"};
        case 2: p.max_pages_per_seq = -f.range(0, 10); return {StatusCode::kInvalidArgument, "max_pages_per_seq"};
        case 3: p.cu_seqlens_k = at<const int32_t>(kCuK, 0); return {StatusCode::kInvalidArgument, "exclusive"};
        default:
          if (p.batch < 2) return {StatusCode::kSuccess, nullptr};
          p.block_table_batch_stride = p.max_pages_per_seq - f.range(1, 100);
          return {StatusCode::kInvalidArgument, "block_table_batch_stride"};
      }
    case 22:
      if (p.block_table == nullptr || p.seqused_k != nullptr) return {StatusCode::kSuccess, nullptr};
      p.seqlen_k = p.max_pages_per_seq * p.page_size + f.range(1, 1000);
      return {StatusCode::kInvalidArgument, "seqlen_k"};
    case 23: {
      // An output on one of the int32 arrays the kernels read.
      const bool o_extent_known = p.cu_seqlens_q == nullptr || p.total_q > 0;
      const int32_t* arrays[] = {p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k, p.block_table};
      const int32_t* target = arrays[f.range(0, 3)];
      if (target == nullptr) return {StatusCode::kSuccess, nullptr};
      const uintptr_t t = reinterpret_cast<uintptr_t>(target);
      const int out = static_cast<int>(f.range(0, 2));
      if (out == 0 && o_extent_known) {
        p.o = reinterpret_cast<void*>((t & ~uintptr_t{15}) - 16 * static_cast<uintptr_t>(f.range(0, 3)));
      } else if (out == 1 && p.lse != nullptr && o_extent_known) {
        p.lse = reinterpret_cast<float*>(t);
      } else if (out == 2 && p.workspace != nullptr) {
        p.workspace = reinterpret_cast<void*>(t & ~uintptr_t{255});
        if (p.workspace_bytes < 256) p.workspace_bytes = 256;
      } else {
        return {StatusCode::kSuccess, nullptr};
      }
      return {StatusCode::kInvalidArgument, "overlaps"};
    }
    case 24:
      (f.coin() ? p.total_q : p.total_k) = -f.range(1, INT64_MAX);
      return {StatusCode::kInvalidArgument, "total_"};
    case 25:
      // Sizes past the kernels' 32-bit row indices or grid limits.
      switch (f.range(0, 2)) {
        case 0: p.seqlen_q = (int64_t{1} << 30) + f.range(1, 1000); break;
        case 1: p.seqlen_k = (int64_t{1} << 30) + f.range(1, 1000); break;
        default: p.batch = 65536 + f.range(0, 1000); break;
      }
      return {StatusCode::kUnsupported, nullptr};
    case 26: {
      // The decode kernel's packed rows past 2^31 - 16.
      p.backend = Backend::kDecode;
      p.heads_kv = 1;
      p.heads_q = 64;
      p.head_dim = 32;
      p.seqlen_q = (int64_t{1} << 25) + f.range(0, 1000);
      p.lse = nullptr;
      p.cu_seqlens_q = nullptr;
      p.num_splits = 1;
      p.set_contiguous_bnhd();
      if (p.block_table != nullptr) {
        p.k_batch_stride = p.v_batch_stride = p.page_size * p.k_seq_stride;
      }
      p.cu_seqlens_k = nullptr;
      return {StatusCode::kUnsupported, "decode"};
    }
    case 29:
      // The fp8 cache's fields, whatever the call.
      if (f.coin()) {
        const int32_t bad = static_cast<int32_t>(f.coin() ? f.range(2, 1000) : f.range(INT32_MIN, -1));
        p.kv_dtype = static_cast<KvDType>(bad);
        return {StatusCode::kInvalidArgument, "kv_dtype", kUnknownKvDType};
      }
      // Descales need an fp8 cache (an fp8 call is a valid one with kSame too).
      p.kv_dtype = KvDType::kSame;
      switch (f.range(0, 2)) {
        case 0: p.k_descale = at<const float>(kKDescale, 4 * f.range(0, 100)); break;
        case 1: p.v_descale = at<const float>(kVDescale, 4 * f.range(0, 100)); break;
        default: p.descale_head_stride = f.coin() ? 1 : (f.coin() ? f.range(2, 1000) : -f.range(1, INT64_MAX)); break;
      }
      return {StatusCode::kInvalidArgument, "descale", kDescaleWithoutFp8};
    case 30:
    case 31:
      // An fp8 cache's own rules (twice as likely: only some calls have one).
      if (!fp8) return {StatusCode::kSuccess, nullptr};
      switch (f.range(0, 6)) {
        case 0:
          p.descale_head_stride = f.coin() ? 2 : f.pick({int64_t{-1}, int64_t{3}, int64_t{16}, INT64_MAX, INT64_MIN});
          return {StatusCode::kInvalidArgument, "descale_head_stride", kDescaleStride};
        case 1: {
          const bool k = f.coin();
          (k ? p.k_descale : p.v_descale) =
              at<const float>(k ? kKDescale : kVDescale, 4 * f.range(0, 100) + f.range(1, 3));
          return {StatusCode::kInvalidArgument, "4-byte aligned", kDescaleAligned};
        }
        case 2:
          // A multiple of 8 (any head dim's rule) but not of 16.
          (f.coin() ? p.head_dim : p.head_dim_v) = 16 * f.range(0, 15) + 8;
          return {StatusCode::kInvalidArgument, "head_dim", kFp8HeadDim};
        case 3: {
          // A multiple of 8 elements (16 bytes at two bytes an element) but
          // not of 16; batch strides count only without cu_seqlens_k.
          int64_t* const strides[] = {&p.k_seq_stride,  &p.k_head_stride,  &p.v_seq_stride,
                                      &p.v_head_stride, &p.k_batch_stride, &p.v_batch_stride};
          const char* const names[] = {"k_seq_stride",  "k_head_stride",  "v_seq_stride",
                                       "v_head_stride", "k_batch_stride", "v_batch_stride"};
          const int which = static_cast<int>(f.range(0, p.cu_seqlens_k != nullptr ? 3 : 5));
          *strides[which] += 8 + 16 * f.range(0, 3);
          return {StatusCode::kInvalidArgument, names[which], kFp8KvStride};
        }
        case 4: {
          // A complete append (not with varlen K) whose descale lies in the
          // cache it writes.
          if (p.cu_seqlens_k != nullptr) return {StatusCode::kSuccess, nullptr};
          if (p.seqused_k == nullptr) p.seqused_k = at<const int32_t>(kUsed, 4 * f.range(0, 100));
          p.k_new = at<const void>(kKNew, 256 * f.range(0, 100));
          p.v_new = at<const void>(kVNew, 256 * f.range(0, 100));
          p.seqlen_new = f.range(1, 64);
          fill_strides(f, p.seqlen_new, p.heads_kv, p.head_dim, &p.k_new_batch_stride, &p.k_new_seq_stride,
                       &p.k_new_head_stride);
          fill_strides(f, p.seqlen_new, p.heads_kv, dv, &p.v_new_batch_stride, &p.v_new_seq_stride,
                       &p.v_new_head_stride);
          p.workspace = at<void>(kWorkspace, 256 * f.range(0, 100));
          p.workspace_bytes = model_workspace(p);
          const bool k = f.coin();
          (k ? p.k_descale : p.v_descale) = static_cast<const float*>(k ? p.k : p.v);
          return {StatusCode::kInvalidArgument, k ? "k_descale overlaps k" : "v_descale overlaps v", kFp8Append};
        }
        case 5:
          // Forced onto the kernel without an fp8 path.
          p.backend = Backend::kSm80;
          return {StatusCode::kUnsupported, "not on the sm80 kernel", kFp8Backend};
        default: {
          // K and V count one byte an element: O right past the last byte
          // of their documented shape is memory of its own, O on their last
          // 16 bytes overlaps. (Packed K without total_k: extent not known.)
          const bool varlen = p.cu_seqlens_k != nullptr, paged = p.block_table != nullptr;
          if (varlen && p.total_k == 0) return {StatusCode::kSuccess, nullptr};
          const bool is_v = f.coin();
          const int64_t batches = varlen ? 1 : (paged ? p.num_pages : p.batch);
          const int64_t rows = paged ? p.page_size : (varlen ? p.total_k : p.seqlen_k);
          const int64_t bytes = (is_v ? dv : p.head_dim) +
                                (batches - 1) * (is_v ? p.v_batch_stride : p.k_batch_stride) +
                                (rows - 1) * (is_v ? p.v_seq_stride : p.k_seq_stride) +
                                (p.heads_kv - 1) * (is_v ? p.v_head_stride : p.k_head_stride);
          const uintptr_t end = reinterpret_cast<uintptr_t>(is_v ? p.v : p.k) + static_cast<uintptr_t>(bytes);
          if (f.coin()) {
            p.o = reinterpret_cast<void*>((end + 15) & ~uintptr_t{15});
            return {StatusCode::kSuccess, nullptr, kFp8PastExtent};
          }
          p.o = reinterpret_cast<void*>((end - 1) & ~uintptr_t{15});
          return {StatusCode::kInvalidArgument, "overlaps", kFp8OnExtent};
        }
      }
    default:
      // Empty work is a successful no-op whatever the pointers (an append
      // needs query rows: only batch 0 is empty work then).
      (f.coin() && p.k_new == nullptr ? p.seqlen_q : p.batch) = 0;
      p.q = p.k = p.v = nullptr;
      p.o = nullptr;
      p.lse = nullptr;
      p.num_splits = f.coin() ? static_cast<int32_t>(f.range(2, 128)) : p.num_splits;
      p.workspace = nullptr;
      return {StatusCode::kSuccess, nullptr};
  }
}

// make_valid() with 1 to 10 fields replaced by extreme or random values.
AttentionParams make_garbage(Fuzzer& f) {
  AttentionParams p = make_valid(f);
  const int n = static_cast<int>(f.range(1, 10));
  for (int i = 0; i < n; ++i) {
    switch (f.range(0, 54)) {
      case 0: p.q = f.any_ptr(kQ); break;
      case 1: p.k = f.any_ptr(kK); break;
      case 2: p.v = f.any_ptr(kV); break;
      case 3: p.o = const_cast<void*>(f.any_ptr(kO)); break;
      case 4: p.lse = static_cast<float*>(const_cast<void*>(f.any_ptr(kLse))); break;
      case 5: p.dtype = static_cast<DType>(static_cast<int32_t>(f.any_int())); break;
      case 6: p.batch = f.any_int(); break;
      case 7: p.seqlen_q = f.any_int(); break;
      case 8: p.seqlen_k = f.any_int(); break;
      case 9: p.heads_q = f.any_int(); break;
      case 10: p.heads_kv = f.any_int(); break;
      case 11: p.head_dim = f.coin() ? f.any_int() : f.pick(kHeadDims); break;
      case 12: p.q_batch_stride = f.any_int(); break;
      case 13: p.q_seq_stride = f.any_int(); break;
      case 14: p.q_head_stride = f.any_int(); break;
      case 15: p.k_batch_stride = f.any_int(); break;
      case 16: p.k_seq_stride = f.any_int(); break;
      case 17: p.k_head_stride = f.any_int(); break;
      case 18: p.v_batch_stride = f.any_int(); break;
      case 19: p.v_seq_stride = f.any_int(); break;
      case 20: p.v_head_stride = f.any_int(); break;
      case 21: p.o_batch_stride = f.any_int(); break;
      case 22: p.o_seq_stride = f.any_int(); break;
      case 23: p.o_head_stride = f.any_int(); break;
      case 24: p.q_dim_stride = f.coin(0.8) ? 1 : f.any_int(); break;
      case 25: p.causal = f.coin(); break;
      case 26: p.softmax_scale = f.any_float(); break;
      case 27: p.backend = static_cast<Backend>(static_cast<int32_t>(f.coin() ? f.range(0, 3) : f.any_int())); break;
      case 28: p.cu_seqlens_q = static_cast<const int32_t*>(f.any_ptr(kCuQ)); break;
      case 29: p.cu_seqlens_k = static_cast<const int32_t*>(f.any_ptr(kCuK)); break;
      case 30: p.seqused_k = static_cast<const int32_t*>(f.any_ptr(kUsed)); break;
      case 31: p.block_table = static_cast<const int32_t*>(f.any_ptr(kTable)); break;
      case 32: p.block_table_batch_stride = f.any_int(); break;
      case 33: p.max_pages_per_seq = f.any_int(); break;
      case 34: p.page_size = f.any_int(); break;
      case 35: p.num_pages = f.any_int(); break;
      case 36: p.window_left = f.any_int(); break;
      case 37: p.window_right = f.any_int(); break;
      case 38: p.softcap = f.any_float(); break;
      case 39: p.num_splits = static_cast<int32_t>(f.coin() ? f.range(-2, 130) : f.any_int()); break;
      case 40: p.workspace = const_cast<void*>(f.any_ptr(kWorkspace)); break;
      case 41: p.workspace_bytes = static_cast<size_t>(f.any_int()); break;
      case 42: p.total_q = f.any_int(); break;
      case 43: p.total_k = f.any_int(); break;
      case 44: f.coin() ? p.set_contiguous_bnhd() : p.set_contiguous_bhnd(); break;
      case 45: p.head_dim_v = f.coin() ? f.any_int() : f.pick(kHeadDims); break;
      case 46: (f.coin() ? p.k_new : p.v_new) = f.any_ptr(f.coin() ? kKNew : kVNew); break;
      case 47: p.seqlen_new = f.any_int(); break;
      case 48: (f.coin() ? p.k_new_head_stride : p.v_new_seq_stride) = f.any_int(); break;
      case 49: p.rotary_dim = f.any_int(); break;
      case 50: p.rotary_positions = f.any_int(); break;
      case 51: p.kv_dtype = static_cast<KvDType>(static_cast<int32_t>(f.coin() ? f.range(-1, 2) : f.any_int())); break;
      case 52: {
        const bool k = f.coin();
        (k ? p.k_descale : p.v_descale) = static_cast<const float*>(f.any_ptr(k ? kKDescale : kVDescale));
        break;
      }
      case 53: p.descale_head_stride = f.coin() ? f.range(-1, 2) : f.any_int(); break;
      default: p.o = const_cast<void*>(input(f, p)); break;
    }
  }
  return p;
}

// The C struct of `p`, written field by field here (not by the library).
flash_attention_params to_c(const AttentionParams& p) {
  flash_attention_params c;
  std::memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  c.q = p.q;
  c.k = p.k;
  c.v = p.v;
  c.o = p.o;
  c.lse = p.lse;
  const auto dtype = static_cast<int32_t>(p.dtype);
  std::memcpy(&c.dtype, &dtype, sizeof(dtype));
  c.batch = p.batch;
  c.seqlen_q = p.seqlen_q;
  c.seqlen_k = p.seqlen_k;
  c.heads_q = p.heads_q;
  c.heads_kv = p.heads_kv;
  c.head_dim = p.head_dim;
  c.q_batch_stride = p.q_batch_stride;
  c.q_seq_stride = p.q_seq_stride;
  c.q_head_stride = p.q_head_stride;
  c.k_batch_stride = p.k_batch_stride;
  c.k_seq_stride = p.k_seq_stride;
  c.k_head_stride = p.k_head_stride;
  c.v_batch_stride = p.v_batch_stride;
  c.v_seq_stride = p.v_seq_stride;
  c.v_head_stride = p.v_head_stride;
  c.o_batch_stride = p.o_batch_stride;
  c.o_seq_stride = p.o_seq_stride;
  c.o_head_stride = p.o_head_stride;
  c.q_dim_stride = p.q_dim_stride;
  c.k_dim_stride = p.k_dim_stride;
  c.v_dim_stride = p.v_dim_stride;
  c.o_dim_stride = p.o_dim_stride;
  c.causal = p.causal;
  c.softmax_scale = p.softmax_scale;
  const auto backend = static_cast<int32_t>(p.backend);
  std::memcpy(&c.backend, &backend, sizeof(backend));
  c.autotune = p.autotune ? 1 : 0;
  c.cu_seqlens_q = p.cu_seqlens_q;
  c.cu_seqlens_k = p.cu_seqlens_k;
  c.seqused_k = p.seqused_k;
  c.block_table = p.block_table;
  c.block_table_batch_stride = p.block_table_batch_stride;
  c.max_pages_per_seq = p.max_pages_per_seq;
  c.page_size = p.page_size;
  c.num_pages = p.num_pages;
  c.window_left = p.window_left;
  c.window_right = p.window_right;
  c.softcap = p.softcap;
  c.num_splits = p.num_splits;
  c.workspace = p.workspace;
  c.workspace_bytes = p.workspace_bytes;
  c.total_q = p.total_q;
  c.total_k = p.total_k;
  c.head_dim_v = p.head_dim_v;
  c.k_new = p.k_new;
  c.v_new = p.v_new;
  c.seqlen_new = p.seqlen_new;
  c.cu_seqlens_k_new = p.cu_seqlens_k_new;
  c.k_new_batch_stride = p.k_new_batch_stride;
  c.k_new_seq_stride = p.k_new_seq_stride;
  c.k_new_head_stride = p.k_new_head_stride;
  c.v_new_batch_stride = p.v_new_batch_stride;
  c.v_new_seq_stride = p.v_new_seq_stride;
  c.v_new_head_stride = p.v_new_head_stride;
  c.rotary_cos = p.rotary_cos;
  c.rotary_sin = p.rotary_sin;
  c.rotary_dim = p.rotary_dim;
  c.rotary_positions = p.rotary_positions;
  c.rotary_interleaved = p.rotary_interleaved ? 1 : 0;
  const auto kv_dtype = static_cast<int32_t>(p.kv_dtype);
  std::memcpy(&c.kv_dtype, &kv_dtype, sizeof(kv_dtype));
  c.k_descale = p.k_descale;
  c.v_descale = p.v_descale;
  c.descale_head_stride = p.descale_head_stride;
  return c;
}

struct Tally {
  int cases = 0;
  int accepted = 0;
  int rejected = 0;
  int unsupported = 0;
  int forward_calls = 0;
  int failures = 0;
};

#define FUZZ_EXPECT(cond, what)                                                               \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      if (++tally->failures <= 20) ADD_FAILURE() << "case " << index << ": " << what;         \
    }                                                                                         \
  } while (0)

std::string describe(const Status& s) {
  return std::to_string(static_cast<int>(s.code)) + " \"" + s.message + "\"";
}

// Every invariant, and `expected` when the model knows the answer.
void check_case(int index, const AttentionParams& p, const Expectation* expected, bool has_gpu, Tally* tally) {
  ++tally->cases;
  const Status v = flash::validate(p);
  FUZZ_EXPECT(v.code == StatusCode::kSuccess || v.code == StatusCode::kInvalidArgument ||
                  v.code == StatusCode::kUnsupported,
              "validate returned " << describe(v));
  FUZZ_EXPECT(v.ok() == (v.message[0] == '\0'), "validate: a rejection needs a message, a success none: " << describe(v));
  tally->accepted += v.ok();
  tally->rejected += v.code == StatusCode::kInvalidArgument;
  tally->unsupported += v.code == StatusCode::kUnsupported;
  if (expected != nullptr) {
    FUZZ_EXPECT(v.code == expected->code, "validate returned " << describe(v) << ", the model expects code "
                                                                << static_cast<int>(expected->code) << " ("
                                                                << (expected->word ? expected->word : "valid")
                                                                << ")");
    if (expected->word != nullptr && !v.ok()) {
      FUZZ_EXPECT(std::strstr(v.message, expected->word) != nullptr,
                  "validate: \"" << v.message << "\" does not name \"" << expected->word << "\"");
    }
  }

  const flash_attention_params c = to_c(p);
  FUZZ_EXPECT(static_cast<int>(flash_validate(&c)) == static_cast<int>(v.code) &&
                  std::strcmp(flash_last_error_message(), v.message) == 0,
              "flash_validate disagrees with validate " << describe(v) << ": \"" << flash_last_error_message() << "\"");

  // A call validate() accepts would launch on a GPU: fake pointers must not reach one.
  const bool no_work = p.batch == 0 || p.seqlen_q == 0;
  if (!has_gpu || !v.ok() || no_work) {
    ++tally->forward_calls;
    const Status fw = flash::attention_forward(p, nullptr);
    if (!v.ok()) {
      FUZZ_EXPECT(fw.code == v.code && std::strcmp(fw.message, v.message) == 0,
                  "attention_forward " << describe(fw) << " differs from validate " << describe(v));
    } else {
      FUZZ_EXPECT(fw.code != StatusCode::kInvalidArgument,
                  "validate accepted, attention_forward rejected: " << describe(fw));
      FUZZ_EXPECT(fw.ok() == (fw.message[0] == '\0'), "attention_forward message: " << describe(fw));
    }
    FUZZ_EXPECT(static_cast<int>(flash_attention_forward(&c, nullptr)) == static_cast<int>(fw.code) &&
                    std::strcmp(flash_last_error_message(), fw.message) == 0,
                "flash_attention_forward disagrees with attention_forward " << describe(fw) << ": \""
                                                                              << flash_last_error_message() << "\"");
  }
  // Launches nothing, whatever the GPU.
  size_t bytes = 1, c_bytes = 1;
  const Status ws = flash::attention_workspace_size(p, &bytes);
  FUZZ_EXPECT(ws.ok() == (ws.message[0] == '\0'), "attention_workspace_size message: " << describe(ws));
  FUZZ_EXPECT(static_cast<int>(flash_attention_workspace_size(&c, &c_bytes)) == static_cast<int>(ws.code) &&
                  std::strcmp(flash_last_error_message(), ws.message) == 0 && c_bytes == bytes,
              "flash_attention_workspace_size disagrees with attention_workspace_size " << describe(ws));
}

// The C struct with random bytes in its enum and bool fields: a bool byte
// other than 0 or 1 is rejected naming the field; otherwise the C API
// answers what the C++ API answers for the same integers.
void check_c_garbage(int index, Fuzzer& f, const AttentionParams& base, Tally* tally) {
  flash_attention_params c = to_c(base);
  const auto dtype = static_cast<int32_t>(f.coin() ? f.range(-3, 5) : static_cast<int64_t>(f.rng_()));
  const auto backend = static_cast<int32_t>(f.coin() ? f.range(-3, 6) : static_cast<int64_t>(f.rng_()));
  const auto causal = static_cast<unsigned char>(f.coin(0.7) ? f.range(0, 1) : f.range(2, 255));
  const auto kv_dtype = static_cast<int32_t>(f.coin() ? f.range(-3, 4) : static_cast<int64_t>(f.rng_()));
  std::memcpy(&c.dtype, &dtype, sizeof(dtype));
  std::memcpy(&c.backend, &backend, sizeof(backend));
  std::memcpy(&c.kv_dtype, &kv_dtype, sizeof(kv_dtype));
  std::memcpy(&c.causal, &causal, sizeof(causal));
  const flash_status_code got = flash_validate(&c);
  const std::string message = flash_last_error_message();
  if (causal > 1) {
    FUZZ_EXPECT(got == FLASH_INVALID_ARGUMENT && message.find("causal") != std::string::npos,
                "a causal byte of " << int{causal} << " gave " << got << " \"" << message << "\"");
    size_t bytes = 1;
    FUZZ_EXPECT(flash_attention_workspace_size(&c, &bytes) == FLASH_INVALID_ARGUMENT && bytes == 0,
                "workspace size with a causal byte of " << int{causal});
    return;
  }
  AttentionParams p = base;
  p.dtype = static_cast<DType>(dtype);
  p.backend = static_cast<Backend>(backend);
  p.causal = causal != 0;
  p.kv_dtype = static_cast<KvDType>(kv_dtype);
  const Status v = flash::validate(p);
  FUZZ_EXPECT(static_cast<int>(got) == static_cast<int>(v.code) && message == v.message,
              "C " << got << " \"" << message << "\" vs C++ " << describe(v));
}

TEST(Fuzz, ArgumentChecksAgreeEverywhere) {
  int devices = 0;
  const bool has_gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
  Fuzzer f(kSeed);
  Tally tally;
  int model_cases = 0;
  int fp8_valid = 0;
  int fp8_hits[kFp8Rules] = {};
  for (int i = 0; i < kCases && tally.failures < 100; ++i) {
    const int kind = static_cast<int>(f.range(0, 9));
    if (kind < 2) {
      const AttentionParams p = make_valid(f);
      const Expectation valid{StatusCode::kSuccess, nullptr};
      check_case(i, p, &valid, has_gpu, &tally);
      ++model_cases;
      fp8_valid += p.kv_dtype == KvDType::kFloat8E4M3;
    } else if (kind < 6) {
      AttentionParams p = make_valid(f);
      const Expectation e = violate(f, &p);
      check_case(i, p, &e, has_gpu, &tally);
      ++model_cases;
      if (e.fp8_rule >= 0) ++fp8_hits[e.fp8_rule];
    } else if (kind < 9) {
      check_case(i, make_garbage(f), nullptr, has_gpu, &tally);
    } else {
      check_c_garbage(i, f, f.coin() ? make_valid(f) : make_garbage(f), &tally);
    }
  }
  EXPECT_EQ(tally.failures, 0);
  // The mix must exercise both sides of the checks.
  EXPECT_GT(tally.accepted, kCases / 10);
  EXPECT_GT(tally.rejected, kCases / 10);
  EXPECT_GT(tally.unsupported, 100);
  // Valid fp8 calls, and every fp8 rule, each broken (or kept) many times.
  EXPECT_GT(fp8_valid, kCases / 100);
  for (int r = 0; r < kFp8Rules; ++r) EXPECT_GE(fp8_hits[r], 50) << kFp8RuleNames[r];
  std::printf("fuzz: %d cases (%d against the model), %d accepted, %d invalid, %d unsupported, %d forward calls%s\n",
              tally.cases, model_cases, tally.accepted, tally.rejected, tally.unsupported, tally.forward_calls,
              has_gpu ? " (GPU present: accepted calls not forwarded)" : "");
  std::printf("fuzz: %d valid fp8 calls; fp8 rules:", fp8_valid);
  for (int r = 0; r < kFp8Rules; ++r) std::printf("%s %s %d", r ? "," : "", kFp8RuleNames[r], fp8_hits[r]);
  std::printf("\n");
}

}  // namespace
