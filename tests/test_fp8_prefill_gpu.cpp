// FP8 prefill (AttentionParams::q_dtype = kFloat8E4M3): Q, K and V in e4m3
// with descales, O in bf16 or fp16, on the Hopper FP8 kernel
// (kernels/sm90/fp8_kernel.cuh), against a float64 reference on the host
// computed from the dequantised inputs.
//
// Tolerance. Two roundings matter:
//   - Q K^T: the products of e4m3 values are exact, but Hopper's e4m3 wgmma
//     keeps only about 14 bits in its accumulator (the DeepSeek-V3 report
//     measured this on the H800) and truncates what it drops, so the
//     errors of the head_dim / 32 k-steps add up, all toward zero. The
//     checks allow e = 2^-10 * scale * max_j sum_t |q_t k_t| per row (the
//     row's largest such sum, dequantised, times the descales); each case
//     prints its largest LSE error as a fraction of that allowance
//     (docs/perf/fp8-prefill-qkv.md has the H200's);
//   - P V: each probability (scaled so the row's largest is 256, or 64 to
//     256 where the lazy max runs: head dim 256) is rounded to e4m3, off by
//     at most 2^-4 of itself, and those below half of e4m3's smallest
//     subnormal (2^-16 of the row's largest at worst) are dropped.
// So |O - O_ref| <= (2^-4 + keys * 2^-16 + (e^(2e) - 1)) * max|V| + the
// rounding of O (bf16: 2^-9 of |O|, fp16: 2^-12; the checks allow 2^-8), and the LSE is
// within e + 1e-3 + 1e-4 |LSE|. On top, the root-mean-square error must
// stay within 3% of V's: P's rounding is unbiased, so a wrong key order or
// a wrong scale cannot pass on rows whose attention is peaked (the
// "peaked" cases make most rows so, with small e).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "build_config.h"
#include "device_tensor.h"
#include "feature_case.h"
#include "flash/flash.hpp"
#include "gpu_case.h"

namespace flash::test {
namespace {

using ref::e4m3_to_float;
using ref::to_float;

struct Fp8Case {
  std::string name;
  int64_t head_dim;
  int64_t heads_q, heads_kv;
  std::vector<int64_t> lens_q, lens_k;  // per sequence; varlen when `varlen`
  bool varlen = false;
  bool causal = false;
  // A sliding window (FlashAttention-2's convention: row i sees keys
  // [i + d - window_left, i + d + window_right], d = len_k - len_q); -1: no edge.
  int64_t window_left = -1, window_right = -1;
  bool with_lse = true;
  float max_qk = 2.f;          // |Q|, |K| codes drawn up to this (before descales)
  float softmax_scale = 0.f;   // 0: 1/sqrt(head_dim)
  bool descales = true;        // per K/V head powers of two
  bool outlier_channel = false;  // K column 3 at +-448 (e4m3's largest), with a small K descale
  bool sinks = false;
  DType out = DType::kBFloat16;  // O's type
  int64_t seqlen_k_hint = 0;  // varlen: seqlen_k as given (0: the longest); flash takes it as a hint only
  // NaN codes (0x7f) in the first nan_tail V rows of every sequence but
  // the first; the O checks then skip those sequences (their outputs are
  // NaN by definition) and sequence 0's must match: a key block past one
  // sequence's end never reads the next one's V.
  int64_t nan_tail = 0;
  double min_peak = 0.0;  // the rows' mean largest probability must reach this (the peaked cases)
};

// e4m3 codes (finite, both signs) with |value| <= limit.
std::vector<uint8_t> codes_up_to(float limit) {
  std::vector<uint8_t> codes;
  for (int c = 0; c < 256; ++c) {
    const float x = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isfinite(x) && std::fabs(x) <= limit) codes.push_back(static_cast<uint8_t>(c));
  }
  return codes;
}

class Fp8PrefillTest : public GpuTest {
 protected:
  void run_case(const Fp8Case& c);
};

void Fp8PrefillTest::run_case(const Fp8Case& c) {
  SCOPED_TRACE(c.name);
  const int64_t batch = static_cast<int64_t>(c.lens_q.size());
  const int64_t d = c.head_dim;
  const int64_t max_q = *std::max_element(c.lens_q.begin(), c.lens_q.end());
  const int64_t max_k = *std::max_element(c.lens_k.begin(), c.lens_k.end());
  // Row offsets: packed (varlen) or padded to the longest (dense).
  std::vector<int32_t> cu_q(1, 0), cu_k(1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    cu_q.push_back(cu_q.back() + static_cast<int32_t>(c.varlen ? c.lens_q[b] : max_q));
    cu_k.push_back(cu_k.back() + static_cast<int32_t>(c.varlen ? c.lens_k[b] : max_k));
  }
  if (!c.varlen) {
    for (int64_t b = 0; b < batch; ++b) {
      ASSERT_EQ(c.lens_q[b], max_q) << "dense cases have equal lengths";
      ASSERT_EQ(c.lens_k[b], max_k) << "dense cases have equal lengths";
    }
  }
  const int64_t rows_q = cu_q.back(), rows_k = cu_k.back();

  // Inputs: e4m3 bytes, [rows, heads, d].
  uint64_t state = splitmix64(case_seed(std::hash<std::string>{}(c.name)));
  auto next = [&]() { return state = splitmix64(state); };
  const std::vector<uint8_t> qk_codes = codes_up_to(c.max_qk);
  const std::vector<uint8_t> v_codes = codes_up_to(4.f);
  std::vector<uint8_t> q8(rows_q * c.heads_q * d), k8(rows_k * c.heads_kv * d), v8(rows_k * c.heads_kv * d);
  for (auto& x : q8) x = qk_codes[next() % qk_codes.size()];
  for (auto& x : k8) x = qk_codes[next() % qk_codes.size()];
  for (auto& x : v8) x = v_codes[next() % v_codes.size()];
  for (int64_t b = 1; b < batch && c.nan_tail > 0; ++b) {
    // The first row of sequence b (which the previous sequence's last
    // block would reach were there no slack).
    for (int64_t j = 0; j < std::min<int64_t>(c.nan_tail, c.lens_k[b]); ++j) {
      for (int64_t x = 0; x < c.heads_kv * d; ++x) v8[(cu_k[b] + j) * c.heads_kv * d + x] = 0x7f;
    }
  }
  std::vector<float> q_descale, k_descale, v_descale;
  if (c.descales) {
    for (int64_t h = 0; h < c.heads_kv; ++h) {
      q_descale.push_back(std::ldexp(1.f, static_cast<int>(h % 3) - 1));
      k_descale.push_back(std::ldexp(1.f, -static_cast<int>(h % 2)));
      v_descale.push_back(std::ldexp(1.f, static_cast<int>(h % 3)));
    }
  }
  if (c.outlier_channel) {
    if (k_descale.empty()) k_descale.assign(c.heads_kv, 1.f);
    for (float& f : k_descale) f = std::ldexp(1.f, -7);  // 448 * 2^-7 = 3.5
    for (int64_t r = 0; r < rows_k; ++r) {
      for (int64_t h = 0; h < c.heads_kv; ++h) k8[(r * c.heads_kv + h) * d + 3] = (next() & 1) ? 0x7e : 0xfe;
    }
  }
  std::vector<float> sinks;
  if (c.sinks) {
    for (int64_t h = 0; h < c.heads_q; ++h) sinks.push_back(h % 3 == 0 ? -INFINITY : 0.5f * static_cast<float>(h));
  }
  auto descale_of = [](const std::vector<float>& f, int64_t h) {
    return f.empty() ? 1.0 : static_cast<double>(f[f.size() == 1 ? 0 : h]);
  };

  // The float64 reference on the dequantised inputs (descales applied in the scores and O).
  auto widen = [](const std::vector<uint8_t>& bytes) {
    std::vector<double> out(bytes.size());
    for (size_t i = 0; i < bytes.size(); ++i) out[i] = e4m3_to_float(bytes[i]);
    return out;
  };
  const std::vector<double> qf = widen(q8), kf = widen(k8), vf = widen(v8);
  const int64_t q_per_kv = c.heads_q / c.heads_kv;
  const double scale = c.softmax_scale != 0.f ? c.softmax_scale : 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> ref_o(rows_q * c.heads_q * d, 0.0), ref_lse(batch * c.heads_q * max_q, -INFINITY);
  std::vector<double> acc_err(rows_q * c.heads_q, 0.0);  // e of each (row, head): the scores' accumulation
  std::vector<double> max_v(c.heads_kv, 0.0);
  double v_sq = 0.0;
  for (int64_t r = 0; r < rows_k; ++r) {
    for (int64_t h = 0; h < c.heads_kv; ++h) {
      for (int64_t j = 0; j < d; ++j) {
        const double v = vf[(r * c.heads_kv + h) * d + j] * descale_of(v_descale, h);
        if (!std::isfinite(v)) continue;  // nan_tail's codes
        max_v[h] = std::max(max_v[h], std::fabs(v));
        v_sq += v * v;
      }
    }
  }
  int64_t v_count = 0;
  for (double x : vf) v_count += std::isfinite(x) ? 1 : 0;
  const double v_rms = std::sqrt(v_sq / static_cast<double>(std::max<int64_t>(1, v_count)));
  std::vector<double> s(max_k);
  double peak_sum = 0.0;
  int64_t peak_rows = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t lq = c.lens_q[b], lk = c.lens_k[b];
    for (int64_t hq = 0; hq < c.heads_q; ++hq) {
      const int64_t h = hq / q_per_kv;
      for (int64_t i = 0; i < lq; ++i) {
        const double* q = &qf[((cu_q[b] + i) * c.heads_q + hq) * d];
        const double qk_scale = descale_of(q_descale, h) * descale_of(k_descale, h) * scale;
        double m = -INFINITY, abs_max = 0.0;
        const int64_t diag = i + lk - lq;
        const int64_t right = c.causal ? 0 : c.window_right;
        const int64_t first = c.window_left >= 0 ? std::clamp<int64_t>(diag - c.window_left, 0, lk) : 0;
        const int64_t end = std::max(first, right >= 0 ? std::clamp<int64_t>(diag + right + 1, 0, lk) : lk);
        const int64_t visible = end - first;
        for (int64_t j = first; j < end; ++j) {
          const double* k = &kf[((cu_k[b] + j) * c.heads_kv + h) * d];
          double dot = 0.0, abs_dot = 0.0;
          for (int64_t t = 0; t < d; ++t) {
            dot += q[t] * k[t];
            abs_dot += std::fabs(q[t] * k[t]);
          }
          s[j] = dot * qk_scale;
          m = std::max(m, s[j]);
          abs_max = std::max(abs_max, abs_dot * qk_scale);
        }
        double l = 0.0;
        for (int64_t j = first; j < end; ++j) l += std::exp(s[j] - m);
        double lse = visible > 0 ? m + std::log(l) : -INFINITY;
        double total = lse;
        if (c.sinks && std::isfinite(sinks[hq])) {
          total = std::isfinite(lse) ? std::max(lse, static_cast<double>(sinks[hq])) +
                                           std::log(std::exp(lse - std::max(lse, static_cast<double>(sinks[hq]))) +
                                                    std::exp(sinks[hq] - std::max(lse, static_cast<double>(sinks[hq]))))
                                     : sinks[hq];
        }
        acc_err[(cu_q[b] + i) * c.heads_q + hq] = std::ldexp(abs_max, -10);
        if (visible > 0) {
          peak_sum += std::exp(m - total);
          ++peak_rows;
        }
        double* o = &ref_o[((cu_q[b] + i) * c.heads_q + hq) * d];
        for (int64_t j = first; j < end; ++j) {
          const double w = std::exp(s[j] - total) * descale_of(v_descale, h);
          const double* v = &vf[((cu_k[b] + j) * c.heads_kv + h) * d];
          for (int64_t t = 0; t < d; ++t) o[t] += w * v[t];
        }
        const int64_t lse_at = c.varlen ? hq * rows_q + cu_q[b] + i : (b * c.heads_q + hq) * max_q + i;
        ref_lse[lse_at] = total;
      }
    }
  }

  const double peak = peak_sum / static_cast<double>(std::max<int64_t>(peak_rows, 1));
  ASSERT_GE(peak, c.min_peak) << "the inputs are not as peaked as the case needs";

  // Device tensors and the call.
  DeviceBuffer q_dev, k_dev, v_dev, o_dev, lse_dev, ws, cuq_dev, cuk_dev, qd_dev, kd_dev, vd_dev, sinks_dev;
  ASSERT_EQ(q_dev.allocate(q8.size()), cudaSuccess);
  ASSERT_EQ(k_dev.allocate(k8.size()), cudaSuccess);
  ASSERT_EQ(v_dev.allocate(v8.size()), cudaSuccess);
  ASSERT_EQ(o_dev.allocate(ref_o.size() * 2), cudaSuccess);
  ASSERT_EQ(lse_dev.allocate(ref_lse.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(q_dev.ptr, q8.data(), q8.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(k_dev.ptr, k8.data(), k8.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(v_dev.ptr, v8.data(), v8.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(o_dev.ptr, 0xff, ref_o.size() * 2), cudaSuccess);  // NaN in bf16 and fp16: rows not written show
  ASSERT_EQ(cudaMemset(lse_dev.ptr, 0xff, ref_lse.size() * 4), cudaSuccess);
  auto upload = [](DeviceBuffer* buf, const void* src, size_t bytes) {
    return buf->allocate(bytes) == cudaSuccess && cudaMemcpy(buf->ptr, src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  };

  AttentionParams p;
  p.dtype = c.out;
  p.q_dtype = KvDType::kFloat8E4M3;
  p.kv_dtype = KvDType::kFloat8E4M3;
  p.q = q_dev.ptr;
  p.k = k_dev.ptr;
  p.v = v_dev.ptr;
  p.o = o_dev.ptr;
  p.lse = c.with_lse ? static_cast<float*>(lse_dev.ptr) : nullptr;
  p.batch = batch;
  p.seqlen_q = max_q;
  p.seqlen_k = c.varlen && c.seqlen_k_hint > 0 ? c.seqlen_k_hint : max_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = d;
  p.causal = c.causal;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softmax_scale = c.softmax_scale;
  p.set_contiguous_bnhd();
  if (c.varlen) {
    ASSERT_TRUE(upload(&cuq_dev, cu_q.data(), cu_q.size() * 4));
    ASSERT_TRUE(upload(&cuk_dev, cu_k.data(), cu_k.size() * 4));
    p.cu_seqlens_q = static_cast<const int32_t*>(cuq_dev.ptr);
    p.cu_seqlens_k = static_cast<const int32_t*>(cuk_dev.ptr);
    p.total_q = rows_q;
    p.total_k = rows_k;
  }
  if (!q_descale.empty()) {
    ASSERT_TRUE(upload(&qd_dev, q_descale.data(), q_descale.size() * 4));
    p.q_descale = static_cast<const float*>(qd_dev.ptr);
  }
  if (!k_descale.empty()) {
    ASSERT_TRUE(upload(&kd_dev, k_descale.data(), k_descale.size() * 4));
    p.k_descale = static_cast<const float*>(kd_dev.ptr);
  }
  if (!v_descale.empty()) {
    ASSERT_TRUE(upload(&vd_dev, v_descale.data(), v_descale.size() * 4));
    p.v_descale = static_cast<const float*>(vd_dev.ptr);
  }
  p.descale_head_stride = c.descales || c.outlier_channel ? 1 : 0;
  if (c.sinks) {
    ASSERT_TRUE(upload(&sinks_dev, sinks.data(), sinks.size() * 4));
    p.sinks = static_cast<const float*>(sinks_dev.ptr);
  }

  // Without a workspace the call is refused and writes nothing.
  const Status no_ws = attention_forward(p, stream_);
  EXPECT_EQ(no_ws.code, StatusCode::kInvalidArgument) << no_ws.message;
  int device = 0;
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceProperties(&prop, device), cudaSuccess);
  const bool runs = FLASH_TEST_HAS_SM90 && prop.major == 9 && head_dim_compiled(d);
  size_t ws_bytes = 0;
  const Status ws_size = attention_workspace_size(p, &ws_bytes);
  if (!runs) {
    EXPECT_EQ(ws_size.code, StatusCode::kUnsupported) << ws_size.message;
    return;
  }
  ASSERT_TRUE(ws_size.ok()) << ws_size.message;
  ASSERT_EQ(ws.allocate(ws_bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(ws.ptr, 0x7f, ws_bytes), cudaSuccess);  // e4m3 NaN: bytes the kernel may read unwritten show
  p.workspace = ws.ptr;
  p.workspace_bytes = ws_bytes;
  KernelChoice choice;
  const Status query = query_kernel_choice(p, &choice);
  const Status st = attention_forward(p, stream_);
  ASSERT_TRUE(st.ok()) << st.message;
  ASSERT_TRUE(query.ok()) << query.message;
  EXPECT_EQ(std::string(choice.name).rfind("sm90 fp8", 0), 0u) << choice.name;
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);

  std::vector<uint16_t> o_bits(ref_o.size());
  std::vector<float> lse(ref_lse.size());
  ASSERT_EQ(cudaMemcpy(o_bits.data(), o_dev.ptr, o_bits.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(lse.data(), lse_dev.ptr, lse.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);

  int64_t bad = 0, checked = 0;
  double err_sq = 0.0, worst = 0.0;
  std::string first_bad;
  for (int64_t b = 0; b < batch; ++b) {
    if (c.nan_tail > 0 && b > 0) continue;
    for (int64_t i = 0; i < c.lens_q[b]; ++i) {
      for (int64_t hq = 0; hq < c.heads_q; ++hq) {
        const int64_t h = hq / q_per_kv;
        const double keys = static_cast<double>(c.lens_k[b]);
        const double e = acc_err[(cu_q[b] + i) * c.heads_q + hq];
        for (int64_t t = 0; t < d; ++t) {
          const int64_t at = ((cu_q[b] + i) * c.heads_q + hq) * d + t;
          const double got = to_float(o_bits[at], c.out);
          const double want = ref_o[at];
          const double bound = (0.0625 + keys * std::ldexp(1.0, -16) + std::expm1(2 * e)) * max_v[h] +
                               std::ldexp(std::fabs(want), -8) + 1e-6;
          const double err = std::fabs(got - want);
          ++checked;
          err_sq += std::isfinite(err) ? err * err : 1e30;
          worst = std::max(worst, std::isfinite(err) ? err / bound : 1e30);
          if (!(err <= bound)) {
            if (bad++ == 0) {
              first_bad = "b " + std::to_string(b) + " row " + std::to_string(i) + " head " + std::to_string(hq) +
                          " col " + std::to_string(t) + ": " + std::to_string(got) + " vs " + std::to_string(want) +
                          " (bound " + std::to_string(bound) + ")";
            }
          }
        }
      }
    }
  }
  const double rms = std::sqrt(err_sq / static_cast<double>(std::max<int64_t>(checked, 1)));
  EXPECT_EQ(bad, 0) << bad << " of " << checked << " outputs past the bound; first: " << first_bad;
  EXPECT_LE(rms, 0.03 * v_rms) << "root-mean-square error " << rms << ", V's " << v_rms;

  double lse_worst = 0.0;  // the largest LSE error over e
  if (c.with_lse) {
    int64_t lse_bad = 0;
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t hq = 0; hq < c.heads_q; ++hq) {
        for (int64_t i = 0; i < c.lens_q[b]; ++i) {
          const int64_t at = c.varlen ? hq * rows_q + cu_q[b] + i : (b * c.heads_q + hq) * max_q + i;
          const double want = ref_lse[at];
          const double got = lse[at];
          const double e = acc_err[(cu_q[b] + i) * c.heads_q + hq];
          const bool ok = std::isinf(want) ? got == want : std::fabs(got - want) <= e + 1e-3 + 1e-4 * std::fabs(want);
          if (!std::isinf(want) && e > 0.0) lse_worst = std::max(lse_worst, std::fabs(got - want) / e);
          if (!ok && lse_bad++ == 0) {
            ADD_FAILURE() << "lse b " << b << " head " << hq << " row " << i << ": " << got << " vs " << want;
          }
        }
      }
    }
    EXPECT_EQ(lse_bad, 0);
  }
  std::printf("[ fp8 ] %-24s rms err %.3e (V rms %.3e), worst / bound %.3f, lse worst / e %.3f, mean peak %.2f, %s\n",
              c.name.c_str(), rms, v_rms, worst, lse_worst, peak, choice.name);
}

TEST_F(Fp8PrefillTest, DenseEveryHeadDim) {
  for (int64_t d : {64, 128, 256}) {
    for (bool causal : {false, true}) {
      Fp8Case c;
      c.name = "dense_hd" + std::to_string(d) + (causal ? "_causal" : "");
      c.head_dim = d;
      c.heads_q = 8;
      c.heads_kv = 2;
      c.lens_q = {300, 300};
      c.lens_k = {300, 300};
      c.causal = causal;
      run_case(c);
    }
  }
}

// O in fp16: every head dim, causal and not, dense and varlen.
TEST_F(Fp8PrefillTest, Fp16Output) {
  for (int64_t d : {64, 128, 256}) {
    for (bool varlen : {false, true}) {
      Fp8Case c;
      c.name = std::string(varlen ? "varlen" : "dense") + "_fp16_hd" + std::to_string(d);
      c.out = DType::kFloat16;
      c.head_dim = d;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.varlen = varlen;
      c.lens_q = varlen ? std::vector<int64_t>{65, 0, 257} : std::vector<int64_t>{200, 200};
      c.lens_k = varlen ? std::vector<int64_t>{65, 3, 300} : std::vector<int64_t>{200, 200};
      c.causal = varlen;
      run_case(c);
    }
  }
}

// Peaked attention (scores spread over tens of units): most rows weigh a
// few keys, so a key order in V^T that did not match P's fragment could
// not pass.
TEST_F(Fp8PrefillTest, PeakedAttention) {
  for (int64_t d : {64, 128, 256}) {
    Fp8Case c;
    c.name = "peaked_hd" + std::to_string(d);
    c.head_dim = d;
    c.heads_q = 4;
    c.heads_kv = 4;
    c.lens_q = {257};
    c.lens_k = {700};
    c.max_qk = 2.f;
    c.softmax_scale = 12.f / std::sqrt(static_cast<float>(d));
    c.min_peak = 0.3;
    c.causal = true;
    run_case(c);
  }
}

// Calls without an LSE at head dims 64 and 128 run the kernels without the
// softmax's float32 row sums: O is normalised by the sums P V writes into
// its last eight columns (kRowSumInO), over the ones after each V^T box.
// Peaked rows (a wrong ones layout or key order could not pass), and
// spread ones, varlen, with descales; causal and not (the causal tile at
// 128 has 192-key blocks: three V^T boxes of 64 keys a stage).
TEST_F(Fp8PrefillTest, NoLseNormalisesByTheTensorCoreSums) {
  for (int64_t d : {64, 128}) {
    for (bool causal : {false, true}) {
      Fp8Case c;
      c.name = std::string("no_lse_peaked_hd") + std::to_string(d) + (causal ? "_causal" : "");
      c.head_dim = d;
      c.heads_q = 4;
      c.heads_kv = 4;  // PeakedAttention's heads: descales of 2 and 1/2, peaks of about 1/3
      c.lens_q = {257};
      c.lens_k = {700};
      c.max_qk = 2.f;
      c.softmax_scale = 12.f / std::sqrt(static_cast<float>(d));
      c.min_peak = 0.3;
      c.causal = causal;
      c.with_lse = false;
      run_case(c);
      c.name = std::string("no_lse_spread_varlen_hd") + std::to_string(d) + (causal ? "_causal" : "");
      c.min_peak = 0.0;
      c.softmax_scale = 1.f / std::sqrt(static_cast<float>(d));
      c.varlen = true;
      c.lens_q = {300, 1};
      c.lens_k = {1000, 389};
      run_case(c);
    }
    // Long rows: 16384 keys a row summed by the e4m3 wgmma into O's sum
    // columns and its numerator alike.
    Fp8Case c;
    c.name = "no_lse_long_hd" + std::to_string(d);
    c.head_dim = d;
    c.heads_q = 2;
    c.heads_kv = 1;
    c.lens_q = {64};
    c.lens_k = {16384};
    c.with_lse = false;
    run_case(c);
  }
}

// Chunked-prefill shapes: fewer queries than keys (bottom-right causal), and
// more queries than keys (the first rows see no key: O = 0, LSE = -inf).
TEST_F(Fp8PrefillTest, ChunkedAndEmptyRows) {
  for (int64_t d : {128, 64}) {
    Fp8Case c;
    c.name = "chunk_hd" + std::to_string(d);
    c.head_dim = d;
    c.heads_q = 8;
    c.heads_kv = 1;
    c.lens_q = {130};
    c.lens_k = {1000};
    c.causal = true;
    run_case(c);
    c.name = "more_q_hd" + std::to_string(d);
    c.lens_q = {200};
    c.lens_k = {77};
    run_case(c);
  }
}

// Sliding windows: a left edge (gpt-oss's 128 keys, and one wider than a
// key block), a left and a right edge, a right edge alone, a left edge
// alone; dense and varlen, every head dim; and more queries than keys
// (rows that see no key).
TEST_F(Fp8PrefillTest, Windows) {
  struct W {
    const char* name;
    int64_t left, right;
  };
  for (int64_t d : {128, 64, 256}) {
    for (const W w : {W{"left128", 128, 0}, W{"left300", 300, 0}, W{"left64_right32", 64, 32}, W{"right100", -1, 100},
                      W{"left200_only", 200, -1}}) {
      for (bool varlen : {false, true}) {
        Fp8Case c;
        c.name = std::string("window_") + w.name + "_hd" + std::to_string(d) + (varlen ? "_varlen" : "");
        c.head_dim = d;
        c.heads_q = 4;
        c.heads_kv = 2;
        c.varlen = varlen;
        c.lens_q = varlen ? std::vector<int64_t>{1, 250, 700} : std::vector<int64_t>{700};
        c.lens_k = varlen ? std::vector<int64_t>{40, 250, 900} : std::vector<int64_t>{900};
        c.window_left = w.left;
        c.window_right = w.right;
        run_case(c);
      }
    }
    Fp8Case c;
    c.name = "window_more_q_hd" + std::to_string(d);
    c.head_dim = d;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.lens_q = {300};
    c.lens_k = {100};
    c.window_left = 64;
    c.window_right = 0;
    run_case(c);
  }
}

TEST_F(Fp8PrefillTest, Varlen) {
  for (int64_t d : {128, 256, 64}) {
    for (bool causal : {true, false}) {
      Fp8Case c;
      c.name = "varlen_hd" + std::to_string(d) + (causal ? "_causal" : "");
      c.head_dim = d;
      c.heads_q = 6;
      c.heads_kv = 3;
      c.varlen = true;
      c.lens_q = {1, 129, 0, 300, 64};
      c.lens_k = {33, 129, 5, 420, 64};
      c.causal = causal;
      run_case(c);
    }
  }
}

// Edge cases of the V^T workspace: a varlen seqlen_k below the longest
// sequence (flash takes it as a hint), and NaN codes at the start of each
// sequence but the first (a block past the previous sequence's end must not
// reach them); dense and varlen, lengths off the key blocks (128 keys,
// and causal head dim 128's 192, whose blocks outgrow the slack 144 columns
// gave).
TEST_F(Fp8PrefillTest, WorkspaceEdges) {
  Fp8Case c;
  c.name = "varlen_hint";
  c.head_dim = 128;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.varlen = true;
  c.lens_q = {70, 300};
  c.lens_k = {70, 700};
  c.seqlen_k_hint = 1;
  c.causal = true;
  run_case(c);
  for (int64_t d : {64, 256, 128}) {
    c = Fp8Case{};
    c.name = "dense_nan_next_hd" + std::to_string(d) + (d == 128 ? "_causal" : "");
    c.head_dim = d;
    c.causal = d == 128;
    c.heads_q = 2;
    c.heads_kv = 2;
    c.lens_q = {200, 200};
    c.lens_k = {200, 200};
    c.nan_tail = 64;
    run_case(c);
    c.name = "varlen_nan_next_hd" + std::to_string(d) + (d == 128 ? "_causal" : "");
    c.varlen = true;
    c.lens_q = {50, 20, 130};
    c.lens_k = {5, 129, 131};
    c.nan_tail = 100;
    run_case(c);
  }
}

// Large magnitudes: an outlier K channel at e4m3's largest code, Q and K
// codes up to 448, no descales on Q; sinks; no LSE.
TEST_F(Fp8PrefillTest, OutliersAndSinks) {
  for (int64_t d : {128, 256}) {
    Fp8Case c;
    c.name = "outlier_hd" + std::to_string(d);
    c.head_dim = d;
    c.heads_q = 6;
    c.heads_kv = 2;
    c.lens_q = {190, 190};
    c.lens_k = {190, 190};
    c.max_qk = 448.f;
    c.softmax_scale = 1.f / 4096.f;
    c.outlier_channel = true;
    c.descales = false;
    c.causal = true;
    c.sinks = true;
    run_case(c);
    c.name = "no_lse_hd" + std::to_string(d);
    c.with_lse = false;
    c.sinks = false;
    c.outlier_channel = false;
    c.max_qk = 2.f;
    c.softmax_scale = 0.f;
    c.descales = true;
    run_case(c);
  }
}

}  // namespace
}  // namespace flash::test
