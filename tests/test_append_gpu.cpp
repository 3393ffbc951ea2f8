// Append and attend (AttentionParams::k_new) with and without rotary, on
// dense and paged caches, dense and packed new rows, decode and
// chunked-prefill shapes, on every backend that takes the call:
//  - the cache after the call equals the cache before it with the new rows
//    written at seqused_k[b] onwards (keys rotated as the host rotates them
//    in float32, so bit for bit), rows past the allocation dropped, and
//    every other element, the poisoned rows past the new lengths included,
//    unchanged;
//  - O and the LSE equal, bit for bit, those of the plain call on that
//    cache with seqused_k + n and the host-rotated Q (the same kernel runs
//    both; the plain call is checked against the references elsewhere).
// A CUDA graph of a decode step replays as the uncaptured call runs, with
// new lengths, rows and Q written into its buffers before each replay.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "build_config.h"
#include "feature_case.h"
#include "gpu_case.h"
#include "support/check.h"
#include "support/device_tensor.h"

namespace flash::test {
namespace {

enum class Rotary { kNone, kNeox, kInterleaved };

struct AppendConfig {
  std::string name;
  DType dtype = DType::kBFloat16;
  int64_t head_dim = 128, head_dim_v = 0, heads_q = 8, heads_kv = 2;
  std::vector<int64_t> old_lens;  // seqused_k before the append
  std::vector<int64_t> new_lens;  // rows appended per sequence (all equal unless varlen_new)
  bool varlen_new = false;
  bool varlen_q = false;          // Q rows per sequence: new_lens (packed), else seqlen_q each
  int64_t seqlen_q = 1;
  int64_t capacity = 256;         // keys per sequence the cache holds
  int64_t page_size = 0;          // 0: dense cache
  bool causal = false;
  int64_t window_left = -1;  // with causal: a sliding window
  float softcap = 0.f;
  Rotary rotary = Rotary::kNone;
  int64_t rotary_dim = 0;
  int32_t num_splits = 0;
  // An e4m3 cache (kv_dtype), its descales: one factor, or one per K/V
  // head; empty: null (1). The new rows stay in dtype.
  bool fp8 = false;
  std::vector<float> k_descale, v_descale;
};

std::vector<uint16_t> random_bits(size_t n, uint64_t seed, DType dtype) {
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = splitmix64(seed ^ splitmix64(i));
    const float x = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) * 2.f - 1.f;
    v[i] = ref::from_float(x, dtype);
  }
  return v;
}

// The kernel's rotation of one row (float32, no contraction), as floats:
// each rotated element rounded once when stored, the others exact.
void rotate_values(const uint16_t* src, float* out_row, int64_t width, const AppendConfig& c, const float* cos_row,
                   const float* sin_row) {
  const int64_t rd = c.rotary == Rotary::kNone ? 0 : c.rotary_dim, half = rd / 2;
  for (int64_t e = 0; e < width; ++e) {
    if (e >= rd) {
      out_row[e] = ref::to_float(src[e], c.dtype);
      continue;
    }
    int64_t j, other;
    bool first;
    if (c.rotary == Rotary::kInterleaved) {
      j = e / 2, first = e % 2 == 0, other = first ? e + 1 : e - 1;
    } else {
      first = e < half, j = first ? e : e - half, other = first ? e + half : e - half;
    }
    const float x = ref::to_float(src[e], c.dtype), y = ref::to_float(src[other], c.dtype);
    // Each product rounded on its own, as the kernel's __fmul_rn.
    const volatile float xc = x * cos_row[j], ys = y * sin_row[j];
    out_row[e] = first ? xc - ys : ys + xc;
  }
}

// The same row rounded to dtype (an unrotated element keeps its bits).
void rotate_host(const uint16_t* src, uint16_t* dst, int64_t width, const AppendConfig& c, const float* cos_row,
                 const float* sin_row) {
  std::vector<float> values(static_cast<size_t>(width));
  rotate_values(src, values.data(), width, c, cos_row, sin_row);
  for (int64_t e = 0; e < width; ++e) dst[e] = ref::from_float(values[static_cast<size_t>(e)], c.dtype);
}

// Rotary tables [positions, rd / 2]: position t's pair j turned by
// t * 10000^(-2j / rd). At least one entry each, so an upload has bytes.
void rotary_tables(int64_t positions, int64_t rd, std::vector<float>* cos_t, std::vector<float>* sin_t) {
  cos_t->assign(static_cast<size_t>(std::max<int64_t>(positions * rd / 2, 1)), 0.f);
  sin_t->assign(cos_t->size(), 0.f);
  for (int64_t t = 0; t < positions && rd > 0; ++t) {
    for (int64_t j = 0; j < rd / 2; ++j) {
      const double angle = static_cast<double>(t) * std::pow(10000.0, -2.0 * static_cast<double>(j) / static_cast<double>(rd));
      (*cos_t)[static_cast<size_t>(t * rd / 2 + j)] = static_cast<float>(std::cos(angle));
      (*sin_t)[static_cast<size_t>(t * rd / 2 + j)] = static_cast<float>(std::sin(angle));
    }
  }
}

int compute_major() {
  int device = 0, major = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  return major;
}

class Append : public GpuTest {
 protected:
  void check(const AppendConfig& c, Backend backend);
};

template <typename T>
cudaError_t upload_vec(DeviceBuffer* d, const std::vector<T>& host, cudaStream_t stream) {
  const cudaError_t err = d->allocate(std::max<size_t>(host.size() * sizeof(T), 256));
  if (err != cudaSuccess || host.empty()) return err;
  return ref::upload_sync(d->ptr, host.data(), host.size() * sizeof(T), stream);
}

template <typename T>
std::vector<T> download_vec(const DeviceBuffer& d, size_t n, cudaStream_t stream) {
  std::vector<T> host(n);
  cudaStreamSynchronize(stream);
  if (n > 0) cudaMemcpy(host.data(), d.ptr, n * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

void Append::check(const AppendConfig& c, Backend backend) {
  SCOPED_TRACE(c.name + ", backend " + std::to_string(static_cast<int>(backend)));
  const int64_t B = static_cast<int64_t>(c.old_lens.size());
  const int64_t d = c.head_dim, dv = c.head_dim_v != 0 ? c.head_dim_v : d, hq = c.heads_q, hkv = c.heads_kv;
  const bool paged = c.page_size > 0;
  const int64_t pages_per_seq = paged ? (c.capacity + c.page_size - 1) / c.page_size : 0;
  const int64_t alloc = paged ? pages_per_seq * c.page_size : c.capacity;
  const int64_t num_pages = paged ? B * pages_per_seq + 2 : 0;
  const int64_t slots = paged ? num_pages * c.page_size : B * c.capacity;  // cache rows
  const uint64_t seed = case_seed(std::hash<std::string>{}(c.name));

  // Cache: rows below each old length random, the rest poisoned.
  std::vector<int32_t> table;
  if (paged) {
    std::vector<int32_t> order(static_cast<size_t>(num_pages));
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    table.assign(order.begin(), order.begin() + B * pages_per_seq);
  }
  auto slot_of = [&](int64_t b, int64_t pos) {
    return paged ? table[static_cast<size_t>(b * pages_per_seq + pos / c.page_size)] * c.page_size + pos % c.page_size
                 : b * c.capacity + pos;
  };
  // Caches as bytes, es a element; poison is all ones (a NaN in every
  // dtype, e4m3 included).
  const int64_t es = c.fp8 ? 1 : 2;
  std::vector<uint8_t> k_cache(static_cast<size_t>(slots * hkv * d * es), 0xFF);
  std::vector<uint8_t> v_cache(static_cast<size_t>(slots * hkv * dv * es), 0xFF);
  {
    const std::vector<uint16_t> k_old = random_bits(k_cache.size() / es, seed + 1, c.dtype);
    const std::vector<uint16_t> v_old = random_bits(v_cache.size() / es, seed + 2, c.dtype);
    // e4m3 rows: random codes, the NaN ones (0x7f, 0xff) moved to 0x7e / 0xfe.
    auto code = [](uint16_t bits) { return static_cast<uint8_t>((bits & 0x7f) == 0x7f ? bits ^ 1 : bits); };
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t pos = 0; pos < std::min(c.old_lens[b], alloc); ++pos) {
        const int64_t s = slot_of(b, pos);
        for (int64_t e = s * hkv * d; e < (s + 1) * hkv * d; ++e) {
          if (c.fp8) k_cache[e] = code(k_old[e]);
          else std::memcpy(&k_cache[e * 2], &k_old[e], 2);
        }
        for (int64_t e = s * hkv * dv; e < (s + 1) * hkv * dv; ++e) {
          if (c.fp8) v_cache[e] = code(v_old[e]);
          else std::memcpy(&v_cache[e * 2], &v_old[e], 2);
        }
      }
    }
  }
  // Stores value as cache element `elem`: in dtype, or e4m3 of value / descale.
  auto put = [&](std::vector<uint8_t>& cache, int64_t elem, float value, float descale) {
    if (c.fp8) {
      cache[static_cast<size_t>(elem)] = ref::e4m3_from_float(value / descale);
    } else {
      const uint16_t bits = ref::from_float(value, c.dtype);
      std::memcpy(&cache[static_cast<size_t>(elem * 2)], &bits, 2);
    }
  };
  auto descale_of = [](const std::vector<float>& f, int64_t h) {
    return f.empty() ? 1.f : f[f.size() == 1 ? 0 : static_cast<size_t>(h)];
  };
  // New rows: dense [B, n, hkv, d] or packed [total, hkv, d].
  std::vector<int32_t> cu_new{0};
  for (int64_t n : c.new_lens) cu_new.push_back(cu_new.back() + static_cast<int32_t>(n));
  const int64_t seqlen_new = *std::max_element(c.new_lens.begin(), c.new_lens.end());
  const int64_t new_rows = c.varlen_new ? cu_new.back() : B * seqlen_new;
  const std::vector<uint16_t> k_new = random_bits(static_cast<size_t>(new_rows * hkv * d), seed + 3, c.dtype);
  const std::vector<uint16_t> v_new = random_bits(static_cast<size_t>(new_rows * hkv * dv), seed + 4, c.dtype);
  auto new_row = [&](int64_t b, int64_t t) { return c.varlen_new ? cu_new[b] + t : b * seqlen_new + t; };
  // Q: dense [B, seqlen_q, hq, d] or packed by new_lens.
  std::vector<int32_t> cu_q{0};
  for (int64_t n : c.new_lens) cu_q.push_back(cu_q.back() + static_cast<int32_t>(n));
  const int64_t q_rows = c.varlen_q ? cu_q.back() : B * c.seqlen_q;
  const std::vector<uint16_t> q = random_bits(static_cast<size_t>(std::max<int64_t>(q_rows, 1) * hq * d), seed + 5, c.dtype);
  const int64_t rd = c.rotary == Rotary::kNone ? 0 : c.rotary_dim;
  std::vector<float> cos_t, sin_t;
  rotary_tables(alloc, rd, &cos_t, &sin_t);

  // The expected cache, lengths and rotated Q.
  std::vector<uint8_t> k_expect = k_cache, v_expect = v_cache;
  std::vector<float> row_values(static_cast<size_t>(std::max(d, dv)));
  std::vector<int32_t> old32, len32;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = std::min(c.old_lens[b] + c.new_lens[b], alloc);
    old32.push_back(static_cast<int32_t>(c.old_lens[b]));
    len32.push_back(static_cast<int32_t>(len));
    for (int64_t pos = c.old_lens[b]; pos < len; ++pos) {
      const int64_t s = slot_of(b, pos), r = new_row(b, pos - c.old_lens[b]);
      for (int64_t h = 0; h < hkv; ++h) {
        rotate_values(k_new.data() + (r * hkv + h) * d, row_values.data(), d, c, cos_t.data() + pos * rd / 2,
                      sin_t.data() + pos * rd / 2);
        for (int64_t e = 0; e < d; ++e) {
          put(k_expect, (s * hkv + h) * d + e, row_values[static_cast<size_t>(e)], descale_of(c.k_descale, h));
        }
        for (int64_t e = 0; e < dv; ++e) {
          put(v_expect, (s * hkv + h) * dv + e, ref::to_float(v_new[static_cast<size_t>((r * hkv + h) * dv + e)], c.dtype),
              descale_of(c.v_descale, h));
        }
      }
    }
  }
  std::vector<uint16_t> q_rot = q;
  for (int64_t b = 0; b < B && rd > 0; ++b) {
    const int64_t len_q = c.varlen_q ? c.new_lens[b] : c.seqlen_q;
    for (int64_t i = 0; i < len_q; ++i) {
      const int64_t row = c.varlen_q ? cu_q[b] + i : b * c.seqlen_q + i;
      const int64_t pos = std::min(std::max<int64_t>(len32[b] - len_q + i, 0), alloc - 1);
      for (int64_t h = 0; h < hq; ++h) {
        rotate_host(q.data() + (row * hq + h) * d, q_rot.data() + (row * hq + h) * d, d, c,
                    cos_t.data() + pos * rd / 2, sin_t.data() + pos * rd / 2);
      }
    }
  }

  DeviceBuffer k_dev, v_dev, kn_dev, vn_dev, q_dev, o_dev, lse_dev, used_dev, cu_new_dev, cu_q_dev, table_dev, cos_dev,
      sin_dev, ws_dev, kd_dev, vd_dev;
  ASSERT_EQ(upload_vec(&kd_dev, c.k_descale, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&vd_dev, c.v_descale, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&k_dev, k_cache, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&v_dev, v_cache, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&kn_dev, k_new, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&vn_dev, v_new, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&q_dev, q, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&used_dev, old32, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&cu_new_dev, cu_new, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&cu_q_dev, cu_q, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&table_dev, table, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&cos_dev, cos_t, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&sin_dev, sin_t, stream_), cudaSuccess);
  const size_t o_elems = static_cast<size_t>(std::max<int64_t>(q_rows, 1) * hq * dv);
  const size_t lse_elems = static_cast<size_t>(std::max<int64_t>(q_rows, 1) * hq);
  ASSERT_EQ(o_dev.allocate(o_elems * 2), cudaSuccess);
  ASSERT_EQ(lse_dev.allocate(lse_elems * 4), cudaSuccess);

  AttentionParams p;
  p.dtype = c.dtype;
  p.batch = B;
  p.seqlen_q = c.varlen_q ? seqlen_new : c.seqlen_q;
  p.seqlen_k = alloc;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = d;
  p.head_dim_v = c.head_dim_v;
  p.set_contiguous_bnhd();
  p.q = q_dev.ptr;
  p.k = k_dev.ptr;
  p.v = v_dev.ptr;
  p.o = o_dev.ptr;
  p.lse = static_cast<float*>(lse_dev.ptr);
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.softcap = c.softcap;
  p.backend = backend;
  p.num_splits = c.num_splits;
  p.seqused_k = static_cast<const int32_t*>(used_dev.ptr);
  if (c.varlen_q) {
    p.cu_seqlens_q = static_cast<const int32_t*>(cu_q_dev.ptr);
    p.total_q = q_rows;
    p.q_batch_stride = p.o_batch_stride = 0;
  }
  if (paged) {
    p.block_table = static_cast<const int32_t*>(table_dev.ptr);
    p.block_table_batch_stride = pages_per_seq;
    p.max_pages_per_seq = pages_per_seq;
    p.page_size = c.page_size;
    p.num_pages = num_pages;
    p.k_batch_stride = c.page_size * hkv * d;
    p.v_batch_stride = c.page_size * hkv * dv;
  }
  if (c.fp8) {
    p.kv_dtype = KvDType::kFloat8E4M3;
    p.k_descale = c.k_descale.empty() ? nullptr : static_cast<const float*>(kd_dev.ptr);
    p.v_descale = c.v_descale.empty() ? nullptr : static_cast<const float*>(vd_dev.ptr);
    p.descale_head_stride = std::max(c.k_descale.size(), c.v_descale.size()) > 1 ? 1 : 0;
  }
  AttentionParams plain = p;  // the same call on the appended cache, below
  p.k_new = kn_dev.ptr;
  p.v_new = vn_dev.ptr;
  p.seqlen_new = seqlen_new;
  p.k_new_head_stride = d, p.k_new_seq_stride = hkv * d, p.k_new_batch_stride = seqlen_new * hkv * d;
  p.v_new_head_stride = dv, p.v_new_seq_stride = hkv * dv, p.v_new_batch_stride = seqlen_new * hkv * dv;
  if (c.varlen_new) {
    p.cu_seqlens_k_new = static_cast<const int32_t*>(cu_new_dev.ptr);
    p.k_new_batch_stride = p.v_new_batch_stride = 0;
  }
  if (rd > 0) {
    p.rotary_cos = static_cast<const float*>(cos_dev.ptr);
    p.rotary_sin = static_cast<const float*>(sin_dev.ptr);
    p.rotary_dim = rd;
    p.rotary_positions = alloc;
    p.rotary_interleaved = c.rotary == Rotary::kInterleaved;
  }

  // Without a workspace the call is refused and writes nothing.
  {
    const Status s = attention_forward(p, stream_);
    ASSERT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
    EXPECT_NE(std::string(s.message).find("k_new needs a workspace"), std::string::npos) << s.message;
  }
  size_t ws_bytes = 0;
  {
    const Status s = attention_workspace_size(p, &ws_bytes);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  ASSERT_GT(ws_bytes, 0u);
  ASSERT_EQ(ws_dev.allocate(ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(ws_dev.ptr, 0xFF, ws_bytes, stream_), cudaSuccess);
  p.workspace = ws_dev.ptr;
  p.workspace_bytes = ws_bytes;
  ASSERT_EQ(ref::poison(o_dev.ptr, o_elems * 2, stream_), cudaSuccess);
  {
    const Status s = attention_forward(p, stream_);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_TRUE(download_vec<uint8_t>(k_dev, k_cache.size(), stream_) == k_expect) << "K cache after the append";
  EXPECT_TRUE(download_vec<uint8_t>(v_dev, v_cache.size(), stream_) == v_expect) << "V cache after the append";
  EXPECT_TRUE(download_vec<uint16_t>(q_dev, q.size(), stream_) == q) << "Q was written";
  const std::vector<uint16_t> o_append = download_vec<uint16_t>(o_dev, o_elems, stream_);
  const std::vector<float> lse_append = download_vec<float>(lse_dev, lse_elems, stream_);

  // The plain call on the expected cache, lengths and rotated Q.
  DeviceBuffer k2, v2, q2, used2, ws2;
  ASSERT_EQ(upload_vec(&k2, k_expect, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&v2, v_expect, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&q2, q_rot, stream_), cudaSuccess);
  ASSERT_EQ(upload_vec(&used2, len32, stream_), cudaSuccess);
  plain.k = k2.ptr, plain.v = v2.ptr, plain.q = q2.ptr;
  plain.seqused_k = static_cast<const int32_t*>(used2.ptr);
  size_t plain_bytes = 0;
  ASSERT_TRUE(attention_workspace_size(plain, &plain_bytes).ok());
  if (plain_bytes > 0) {
    ASSERT_EQ(ws2.allocate(plain_bytes), cudaSuccess);
    plain.workspace = ws2.ptr;
    plain.workspace_bytes = plain_bytes;
  }
  ASSERT_EQ(ref::poison(o_dev.ptr, o_elems * 2, stream_), cudaSuccess);
  {
    const Status s = attention_forward(plain, stream_);
    ASSERT_TRUE(s.ok()) << s.message;
  }
  EXPECT_TRUE(download_vec<uint16_t>(o_dev, o_elems, stream_) == o_append) << "O differs from the plain call's";
  EXPECT_TRUE(download_vec<float>(lse_dev, lse_elems, stream_) == lse_append) << "LSE differs from the plain call's";
  // A row that sees keys has a finite LSE: the call attended to something.
  EXPECT_TRUE(std::any_of(lse_append.begin(), lse_append.end(), [](float x) { return std::isfinite(x); }));
}

std::vector<AppendConfig> configs() {
  std::vector<AppendConfig> v;
  {
    AppendConfig c;
    c.name = "decode_dense_neox";
    c.old_lens = {0, 17, 250};
    c.new_lens = {1, 1, 1};
    c.capacity = 300;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 128;
    v.push_back(c);
  }
  {
    AppendConfig c;
    c.name = "decode_paged16_interleaved_partial";
    c.dtype = DType::kFloat16;
    c.old_lens = {5, 100, 31, 256};  // the last cache is full: its new row is dropped
    c.new_lens = {1, 1, 1, 1};
    c.page_size = 16;
    c.rotary = Rotary::kInterleaved;
    c.rotary_dim = 64;
    c.num_splits = 3;
    v.push_back(c);
  }
  {
    AppendConfig c;
    c.name = "prefill_dense_causal_neox";
    c.old_lens = {0, 130};
    c.new_lens = {70, 70};
    c.seqlen_q = 70;
    c.causal = true;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 128;
    v.push_back(c);
  }
  {
    AppendConfig c;
    c.name = "prefill_paged3_no_rotary";
    c.old_lens = {40, 0, 200};
    c.new_lens = {33, 33, 33};
    c.seqlen_q = 33;
    c.page_size = 3;
    c.causal = true;
    v.push_back(c);
  }
  {
    AppendConfig c;
    c.name = "varlen_paged8_neox";
    c.old_lens = {3, 0, 60, 250};
    c.new_lens = {1, 40, 0, 7};  // the last one overflows the 256 keys by one
    c.varlen_new = true;
    c.varlen_q = true;
    c.page_size = 8;
    c.causal = true;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 32;
    v.push_back(c);
  }
  {
    // Head dim 80 on the 96-wide kernels (4-chunk swizzle, columns past 80
    // zero in the tiles), three new rows per sequence, the first
    // sequence's crossing a 64-key block.
    AppendConfig c;
    c.name = "decode_paged16_hd80_neox_three_rows";
    c.head_dim = 80;
    c.old_lens = {62, 0, 200};
    c.new_lens = {3, 3, 3};
    c.seqlen_q = 3;
    c.causal = true;
    c.page_size = 16;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 64;
    v.push_back(c);
  }
  {
    // Head dim 256 (its decode kernel's registers at their limit), split.
    AppendConfig c;
    c.name = "decode_dense_hd256_interleaved_split";
    c.head_dim = 256;
    c.heads_q = 4;
    c.old_lens = {100, 255};
    c.new_lens = {1, 1};
    c.capacity = 300;
    c.rotary = Rotary::kInterleaved;
    c.rotary_dim = 256;
    c.num_splits = 2;
    v.push_back(c);
  }
  {
    // Head dim 192: three column pairs a lane in Q's rotation (NeoX over
    // all 192 columns), paged, split.
    AppendConfig c;
    c.name = "decode_paged16_hd192_neox_split";
    c.head_dim = 192;
    c.old_lens = {130, 9};
    c.new_lens = {1, 1};
    c.page_size = 16;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 192;
    c.num_splits = 3;
    v.push_back(c);
  }
  {
    // Head dim 96, fp16: rotary half 48, so lanes 0-15 take a second
    // column pair; two tokens (rows of two warps' sets).
    AppendConfig c;
    c.name = "decode_dense_hd96_fp16_interleaved_two_rows";
    c.dtype = DType::kFloat16;
    c.head_dim = 96;
    c.old_lens = {77, 0, 190};
    c.new_lens = {2, 2, 2};
    c.seqlen_q = 2;
    c.causal = true;
    c.rotary = Rotary::kInterleaved;
    c.rotary_dim = 96;
    v.push_back(c);
  }
  {
    // Head dim 32: rotary half 16, lanes 16-31 idle in Q's rotation.
    AppendConfig c;
    c.name = "decode_dense_hd32_neox";
    c.head_dim = 32;
    c.old_lens = {1, 64, 255};
    c.new_lens = {1, 1, 1};
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 32;
    v.push_back(c);
  }
  {
    // The score-modifier and windowed kernels, two row blocks of 16 (16
    // query heads a K/V head, two tokens) times four splits: many more
    // CTAs per (batch, K/V head) than new rows.
    AppendConfig c;
    c.name = "decode_paged16_window_softcap_split";
    c.heads_q = 32;
    c.heads_kv = 2;
    c.old_lens = {300, 40, 510};
    c.new_lens = {2, 2, 2};
    c.seqlen_q = 2;
    c.capacity = 512;
    c.page_size = 16;
    c.causal = true;
    c.window_left = 100;
    c.softcap = 30.f;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 128;
    c.num_splits = 4;
    v.push_back(c);
  }
  {
    AppendConfig c;
    c.name = "decode_dense_value_dim_interleaved";
    c.head_dim = 64;
    c.head_dim_v = 128;
    c.heads_q = 16;
    c.heads_kv = 1;
    c.old_lens = {90, 7};
    c.new_lens = {2, 2};
    c.seqlen_q = 2;
    c.causal = true;
    c.rotary = Rotary::kInterleaved;
    c.rotary_dim = 64;
    v.push_back(c);
    // The same with the keys split: flash's choice no longer splits a
    // 256-key cache (the combine would cost more than the split saves).
    c.name = "decode_dense_value_dim_interleaved_2splits";
    c.num_splits = 2;
    v.push_back(c);
  }
  return v;
}

std::vector<AppendConfig> fp8_configs() {
  std::vector<AppendConfig> v;
  {
    // Decode, split, into 16-key pages; per-head descales, the first K
    // head's small enough that new keys saturate (|x| / 2^-9 > 448).
    AppendConfig c;
    c.name = "fp8_decode_paged16_neox";
    c.fp8 = true;
    c.old_lens = {5, 100, 31, 256};
    c.new_lens = {1, 1, 1, 1};
    c.page_size = 16;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 128;
    c.num_splits = 3;
    c.k_descale = {1.f / 512, 1.f / 64};
    c.v_descale = {1.f / 128, 1.f / 256};
    v.push_back(c);
  }
  {
    // Chunked prefill (the Hopper kernel on kAuto), one descale for all.
    AppendConfig c;
    c.name = "fp8_prefill_dense_causal_interleaved";
    c.fp8 = true;
    c.dtype = DType::kFloat16;
    c.head_dim = 64;
    c.old_lens = {0, 130};
    c.new_lens = {40, 40};
    c.seqlen_q = 40;
    c.causal = true;
    c.rotary = Rotary::kInterleaved;
    c.rotary_dim = 32;
    c.k_descale = {1.f / 128};
    c.v_descale = {1.f / 64};
    v.push_back(c);
  }
  {
    // No descales (1), no rotary, packed new rows.
    AppendConfig c;
    c.name = "fp8_varlen_paged8_plain";
    c.fp8 = true;
    c.old_lens = {3, 0, 60};
    c.new_lens = {1, 20, 2};
    c.varlen_new = true;
    c.varlen_q = true;
    c.page_size = 8;
    c.causal = true;
    v.push_back(c);
  }
  {
    // A dense cache, V wider than K, one K/V head for 16 query heads.
    AppendConfig c;
    c.name = "fp8_decode_dense_value_dim";
    c.fp8 = true;
    c.head_dim = 64;
    c.head_dim_v = 128;
    c.heads_q = 16;
    c.heads_kv = 1;
    c.old_lens = {90, 7};
    c.new_lens = {2, 2};
    c.seqlen_q = 2;
    c.causal = true;
    c.rotary = Rotary::kNeox;
    c.rotary_dim = 64;
    c.k_descale = {1.f / 32};
    c.v_descale = {1.f / 16};
    v.push_back(c);
  }
  return v;
}

// Appends into an e4m3 cache: the new rows stored as e4m3(x / descale),
// rotated keys first (the host's float32 rotation and nearest-even e4m3,
// bit for bit), then the plain fp8-cache call's O. kSm80 takes no fp8 cache.
TEST_F(Append, QuantisesIntoAnFp8Cache) {
  for (const AppendConfig& c : fp8_configs()) {
    if (!head_dim_runs(std::max(c.head_dim, c.head_dim_v))) continue;
    for (Backend b : {Backend::kAuto, Backend::kDecode, Backend::kSm90}) {
      if (b == Backend::kSm90 && (compute_major() != 9 || !FLASH_TEST_HAS_SM90 || c.num_splits > 1)) continue;
      check(c, b);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(Append, MatchesThePlainCallOnTheAppendedCache) {
  for (const AppendConfig& c : configs()) {
    if (!head_dim_runs(std::max(c.head_dim, c.head_dim_v))) continue;
    for (Backend b : {Backend::kAuto, Backend::kSm80, Backend::kDecode, Backend::kSm90}) {
      if (b == Backend::kSm90 && (compute_major() != 9 || !FLASH_TEST_HAS_SM90 || (c.page_size > 0 && c.page_size % 8 != 0) ||
                                  c.num_splits > 1)) {
        continue;
      }
      check(c, b);
      if (HasFatalFailure()) return;
    }
  }
}

// A captured decode step with an append replays as the uncaptured call
// runs. Two copies of one cache: step after step, a graph of the call
// appends to copy A and the call itself to copy B, with each step's lengths,
// new rows and Q written into the same device buffers before it (as an
// engine replaying one graph per step does). After each step the caches,
// O and the LSE of the two equal bit for bit, and every LSE is finite: the
// rows past the lengths are poisoned (bf16 NaN), so an appended row read
// before the append wrote it shows. (That the fused decode kernel computes
// the plain call's O is MatchesThePlainCallOnTheAppendedCache's check.)
TEST_F(Append, CapturedDecodeStepReplaysWithNewLengths) {
  struct GraphConfig {
    const char* name;
    int64_t page_size;   // 0: dense
    int32_t num_splits;  // 0: flash's choice
  };
  for (const GraphConfig& gc :
       {GraphConfig{"dense", 0, 0}, GraphConfig{"dense_2splits", 0, 2}, GraphConfig{"paged16_4splits", 16, 4}}) {
    SCOPED_TRACE(gc.name);
    if (!head_dim_runs(128)) return;
    constexpr int64_t B = 3, d = 128, hq = 8, hkv = 2, capacity = 320, rd = 128;
    const bool paged = gc.page_size > 0;
    const int64_t pages_per_seq = paged ? capacity / gc.page_size : 0;
    const int64_t num_pages = paged ? B * pages_per_seq : 0;
    const int64_t slots = paged ? num_pages * gc.page_size : B * capacity;
    const uint64_t seed = case_seed(std::hash<std::string>{}(std::string("graph ") + gc.name));
    std::vector<int32_t> table;
    for (int64_t i = 0; i < num_pages; ++i) table.push_back(static_cast<int32_t>(num_pages - 1 - i));
    std::vector<float> cos_t, sin_t;
    rotary_tables(capacity, rd, &cos_t, &sin_t);
    std::vector<int32_t> lens = {5, 63, 200};  // 63: the first step crosses a 64-key block
    constexpr int kSteps = 3;
    // Rows below each starting length random; the rows the steps append to,
    // and all others, poisoned.
    std::vector<uint16_t> k_cache(static_cast<size_t>(slots * hkv * d), kPoison16);
    std::vector<uint16_t> v_cache(k_cache.size(), kPoison16);
    const std::vector<uint16_t> k_rand = random_bits(k_cache.size(), seed + 1, DType::kBFloat16);
    const std::vector<uint16_t> v_rand = random_bits(k_cache.size(), seed + 2, DType::kBFloat16);
    auto slot_of = [&](int64_t b, int64_t pos) {
      return paged ? table[static_cast<size_t>(b * pages_per_seq + pos / gc.page_size)] * gc.page_size +
                         pos % gc.page_size
                   : b * capacity + pos;
    };
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t pos = 0; pos < lens[static_cast<size_t>(b)]; ++pos) {
        const int64_t at = slot_of(b, pos) * hkv * d;
        std::copy_n(k_rand.begin() + at, hkv * d, k_cache.begin() + at);
        std::copy_n(v_rand.begin() + at, hkv * d, v_cache.begin() + at);
      }
    }

    DeviceBuffer k_a, v_a, k_b, v_b, used_a, used_b, ws_a, ws_b, o_a, o_b, lse_a, lse_b, q_dev, kn_dev, vn_dev,
        table_dev, cos_dev, sin_dev;
    for (DeviceBuffer* buf : {&k_a, &k_b}) ASSERT_EQ(upload_vec(buf, k_cache, stream_), cudaSuccess);
    for (DeviceBuffer* buf : {&v_a, &v_b}) ASSERT_EQ(upload_vec(buf, v_cache, stream_), cudaSuccess);
    ASSERT_EQ(upload_vec(&table_dev, table, stream_), cudaSuccess);
    ASSERT_EQ(upload_vec(&cos_dev, cos_t, stream_), cudaSuccess);
    ASSERT_EQ(upload_vec(&sin_dev, sin_t, stream_), cudaSuccess);
    for (DeviceBuffer* buf : {&used_a, &used_b}) ASSERT_EQ(buf->allocate(B * sizeof(int32_t)), cudaSuccess);
    for (DeviceBuffer* buf : {&o_a, &o_b, &q_dev, &kn_dev, &vn_dev}) ASSERT_EQ(buf->allocate(B * hq * d * 2), cudaSuccess);
    for (DeviceBuffer* buf : {&lse_a, &lse_b}) ASSERT_EQ(buf->allocate(B * hq * sizeof(float)), cudaSuccess);

    AttentionParams p;
    p.dtype = DType::kBFloat16;
    p.batch = B;
    p.seqlen_q = 1;
    p.seqlen_k = paged ? pages_per_seq * gc.page_size : capacity;
    p.heads_q = hq;
    p.heads_kv = hkv;
    p.head_dim = d;
    p.set_contiguous_bnhd();
    p.q = q_dev.ptr;
    p.num_splits = gc.num_splits;
    if (paged) {
      p.block_table = static_cast<const int32_t*>(table_dev.ptr);
      p.block_table_batch_stride = pages_per_seq;
      p.max_pages_per_seq = pages_per_seq;
      p.page_size = gc.page_size;
      p.num_pages = num_pages;
      p.k_batch_stride = p.v_batch_stride = gc.page_size * hkv * d;
    }
    p.k_new = kn_dev.ptr;
    p.v_new = vn_dev.ptr;
    p.seqlen_new = 1;
    p.k_new_head_stride = p.v_new_head_stride = d;
    p.k_new_seq_stride = p.v_new_seq_stride = hkv * d;
    p.k_new_batch_stride = p.v_new_batch_stride = hkv * d;
    p.rotary_cos = static_cast<const float*>(cos_dev.ptr);
    p.rotary_sin = static_cast<const float*>(sin_dev.ptr);
    p.rotary_dim = rd;
    p.rotary_positions = capacity;
    AttentionParams pa = p, pb = p;
    pa.k = k_a.ptr, pa.v = v_a.ptr, pa.o = o_a.ptr, pa.lse = static_cast<float*>(lse_a.ptr);
    pa.seqused_k = static_cast<const int32_t*>(used_a.ptr);
    pb.k = k_b.ptr, pb.v = v_b.ptr, pb.o = o_b.ptr, pb.lse = static_cast<float*>(lse_b.ptr);
    pb.seqused_k = static_cast<const int32_t*>(used_b.ptr);
    size_t ws_bytes = 0;
    ASSERT_TRUE(attention_workspace_size(pa, &ws_bytes).ok());
    ASSERT_EQ(ws_a.allocate(ws_bytes), cudaSuccess);
    ASSERT_EQ(ws_b.allocate(ws_bytes), cudaSuccess);
    pa.workspace = ws_a.ptr, pb.workspace = ws_b.ptr;
    pa.workspace_bytes = pb.workspace_bytes = ws_bytes;

    struct Graph {  // destroyed on every exit
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      ~Graph() {
        if (exec != nullptr) cudaGraphExecDestroy(exec);
        if (graph != nullptr) cudaGraphDestroy(graph);
      }
    } g;
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status captured = attention_forward(pa, stream_);
    const cudaError_t end = cudaStreamEndCapture(stream_, &g.graph);  // always end it: the stream stays usable
    ASSERT_TRUE(captured.ok()) << captured.message;
    ASSERT_EQ(end, cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&g.exec, g.graph, 0), cudaSuccess);

    for (int step = 0; step < kSteps; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const std::vector<uint16_t> q = random_bits(static_cast<size_t>(B * hq * d), seed + 10 + step, DType::kBFloat16);
      const std::vector<uint16_t> kn = random_bits(static_cast<size_t>(B * hkv * d), seed + 20 + step, DType::kBFloat16);
      const std::vector<uint16_t> vn = random_bits(kn.size(), seed + 30 + step, DType::kBFloat16);
      ASSERT_EQ(ref::upload_sync(q_dev.ptr, q.data(), q.size() * 2, stream_), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(kn_dev.ptr, kn.data(), kn.size() * 2, stream_), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(vn_dev.ptr, vn.data(), vn.size() * 2, stream_), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(used_a.ptr, lens.data(), lens.size() * 4, stream_), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(used_b.ptr, lens.data(), lens.size() * 4, stream_), cudaSuccess);
      ASSERT_EQ(ref::poison(o_a.ptr, o_a.bytes, stream_), cudaSuccess);
      ASSERT_EQ(ref::poison(o_b.ptr, o_b.bytes, stream_), cudaSuccess);
      ASSERT_EQ(cudaGraphLaunch(g.exec, stream_), cudaSuccess);
      const Status s = attention_forward(pb, stream_);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_TRUE(download_vec<uint16_t>(k_a, k_cache.size(), stream_) ==
                  download_vec<uint16_t>(k_b, k_cache.size(), stream_)) << "K caches differ";
      EXPECT_TRUE(download_vec<uint16_t>(v_a, v_cache.size(), stream_) ==
                  download_vec<uint16_t>(v_b, v_cache.size(), stream_)) << "V caches differ";
      const std::vector<uint16_t> o_graph = download_vec<uint16_t>(o_a, static_cast<size_t>(B * hq * d), stream_);
      EXPECT_TRUE(o_graph == download_vec<uint16_t>(o_b, o_graph.size(), stream_)) << "O differs";
      EXPECT_TRUE(std::none_of(o_graph.begin(), o_graph.end(), [](uint16_t x) { return x == kPoison16; }))
          << "the graph left O elements unwritten";
      const std::vector<float> lse_graph = download_vec<float>(lse_a, static_cast<size_t>(B * hq), stream_);
      EXPECT_TRUE(lse_graph == download_vec<float>(lse_b, lse_graph.size(), stream_)) << "LSE differs";
      EXPECT_TRUE(std::all_of(lse_graph.begin(), lse_graph.end(), [](float x) { return std::isfinite(x); }));
      // The new key went to row lens[b] of copy A: it is poisoned no more.
      const std::vector<uint16_t> k_after = download_vec<uint16_t>(k_a, k_cache.size(), stream_);
      for (int64_t b = 0; b < B; ++b) {
        const int64_t at = slot_of(b, lens[static_cast<size_t>(b)]) * hkv * d;
        EXPECT_TRUE(std::none_of(k_after.begin() + at, k_after.begin() + at + hkv * d,
                                 [](uint16_t x) { return x == kPoison16; }))
            << "sequence " << b << ": no key appended at row " << lens[static_cast<size_t>(b)];
      }
      for (int32_t& len : lens) ++len;
      if (HasFailure()) break;
    }
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace flash::test
