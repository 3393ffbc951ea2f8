// Host pieces of the test support library that every GPU comparison relies
// on: fp16/bf16 <-> float conversion, the window arithmetic of the
// references and the float64 CPU reference. Pure host; always runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "reference.h"

namespace {

using flash::AttentionParams;
using flash::DType;
using flash::StatusCode;
using flash::ref::from_float;
using flash::ref::KeyRange;
using flash::ref::to_float;
using flash::ref::visible_keys;

TEST(HostConversion, KnownValues) {
  EXPECT_EQ(from_float(1.f, DType::kFloat16), 0x3C00);
  EXPECT_EQ(from_float(1.f, DType::kBFloat16), 0x3F80);
  EXPECT_EQ(from_float(-2.f, DType::kFloat16), 0xC000);
  EXPECT_EQ(from_float(-2.f, DType::kBFloat16), 0xC000);
  EXPECT_EQ(to_float(0x3555, DType::kFloat16), 0.333251953125f);
  EXPECT_EQ(to_float(0x3EAB, DType::kBFloat16), 0.333984375f);
  EXPECT_EQ(to_float(0x0001, DType::kFloat16), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_TRUE(std::isinf(to_float(from_float(65520.f, DType::kFloat16), DType::kFloat16)));
}

TEST(HostConversion, RoundsToNearestEven) {
  // 1 + 2^-8 lies halfway between the bf16 neighbours 1 and 1 + 2^-7: even is 1.
  EXPECT_EQ(from_float(1.f + std::ldexp(1.f, -8), DType::kBFloat16), 0x3F80);
  EXPECT_EQ(from_float(1.f + 3 * std::ldexp(1.f, -8), DType::kBFloat16), 0x3F82);
  EXPECT_EQ(from_float(1.f + std::ldexp(1.f, -11), DType::kFloat16), 0x3C00);
  EXPECT_EQ(from_float(1.f + 3 * std::ldexp(1.f, -11), DType::kFloat16), 0x3C02);
}

TEST(HostConversion, PoisonPatternIsNaN) {
  EXPECT_TRUE(std::isnan(to_float(0xFFFF, DType::kFloat16)));
  EXPECT_TRUE(std::isnan(to_float(0xFFFF, DType::kBFloat16)));
}

TEST(HostConversion, EveryNonNaNBitPatternRoundTrips) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    int mismatches = 0;
    for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
      const float x = to_float(static_cast<uint16_t>(bits), dtype);
      if (std::isnan(x)) continue;
      mismatches += from_float(x, dtype) != bits;
    }
    EXPECT_EQ(mismatches, 0) << (dtype == DType::kFloat16 ? "fp16" : "bf16");
  }
}

// Bottom-right aligned windows: d = seqlen_k - seqlen_q, row i sees keys
// i + d - left .. i + d + right, clamped to [0, seqlen_k).
TEST(VisibleKeys, HandComputed) {
  auto keys = [](int64_t i, int64_t sq, int64_t sk, bool causal, int64_t left, int64_t right) {
    const KeyRange r = visible_keys(i, sq, sk, causal, left, right);
    return r.first > r.last ? std::string("none") : std::to_string(r.first) + ".." + std::to_string(r.last);
  };
  EXPECT_EQ(keys(0, 4, 6, false, -1, -1), "0..5");
  EXPECT_EQ(keys(0, 4, 6, true, -1, -1), "0..2");    // d = 2
  EXPECT_EQ(keys(3, 4, 6, true, -1, -1), "0..5");
  EXPECT_EQ(keys(0, 4, 6, false, -1, 0), "0..2");    // window_right 0 is causal
  EXPECT_EQ(keys(0, 4, 6, true, -1, 0), "0..2");
  EXPECT_EQ(keys(1, 4, 6, false, 1, 0), "2..3");
  EXPECT_EQ(keys(2, 4, 6, false, 0, 0), "4..4");
  EXPECT_EQ(keys(0, 4, 6, false, 64, 64), "0..5");
  EXPECT_EQ(keys(3, 4, 6, false, 5, -1), "0..5");
  EXPECT_EQ(keys(0, 4, 6, false, 1, 1), "1..3");
  EXPECT_EQ(keys(0, 6, 4, true, -1, -1), "none");    // d = -2: rows 0 and 1 see no key
  EXPECT_EQ(keys(1, 6, 4, true, -1, -1), "none");
  EXPECT_EQ(keys(2, 6, 4, true, -1, -1), "0..0");
  EXPECT_EQ(keys(0, 1000, 300, false, -1, 32), "none");  // 0 - 700 + 32 < 0
  EXPECT_EQ(keys(668, 1000, 300, false, -1, 32), "0..0");
  EXPECT_EQ(keys(999, 1000, 300, false, 5, -1), "294..299");
  EXPECT_EQ(keys(0, 10, 10, false, 3, 0), "0..0");
  EXPECT_EQ(keys(9, 10, 10, false, 3, 0), "6..9");
  EXPECT_EQ(keys(0, 1, 0, false, -1, -1), "none");  // no keys at all
  // Huge windows do not overflow.
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(keys(3, 4, 6, false, huge, huge), "0..5");
  EXPECT_EQ(keys(0, 4, 6, true, huge, -1), "0..2");
}

// cpu_attention on one query row and three keys small enough to do by hand:
// q = (1, 0, ..), k_j = (x_j, 0, ..), v_j = (j + 1, 0, ..), scale 1, so the
// scores are x_j (capped: c tanh(x_j / c)) and O[0] = sum_j p_j (j + 1).
TEST(CpuReference, WindowAndSoftcapByHand) {
  const double x[3] = {2.0, -1.0, 4.0};
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    AttentionParams p;
    p.dtype = dtype;
    p.batch = 1;
    p.seqlen_q = 2;
    p.seqlen_k = 3;
    p.heads_q = 1;
    p.heads_kv = 1;
    p.head_dim = 32;
    p.softmax_scale = 1.f;
    p.set_contiguous_bnhd();
    std::vector<uint16_t> q(2 * 32, from_float(0.f, dtype)), k(3 * 32, from_float(0.f, dtype)), v = k;
    q[0] = q[32] = from_float(1.f, dtype);
    for (int j = 0; j < 3; ++j) {
      k[j * 32] = from_float(static_cast<float>(x[j]), dtype);
      v[j * 32] = from_float(static_cast<float>(j + 1), dtype);
    }
    struct Case {
      bool causal;
      int64_t left, right;
      float softcap;
    };
    // d = 1: row 0 sees keys up to 1 + right and from 1 - left; row 1 from 2 - left.
    for (const Case& c : {Case{false, -1, -1, 0.f}, Case{false, -1, -1, 2.f}, Case{true, -1, -1, 0.f},
                          Case{false, 0, 0, 2.f}, Case{false, 1, -1, 0.5f}, Case{true, 0, 0, 0.f},
                          Case{false, -1, 0, 0.f}}) {
      p.causal = c.causal;
      p.window_left = c.left;
      p.window_right = c.right;
      p.softcap = c.softcap;
      std::vector<double> o, lse;
      ASSERT_TRUE(flash::ref::cpu_attention(p, q.data(), k.data(), v.data(), &o, &lse).ok());
      ASSERT_EQ(o.size(), 2u * 32);
      ASSERT_EQ(lse.size(), 2u);
      for (int64_t i = 0; i < 2; ++i) {
        SCOPED_TRACE("row " + std::to_string(i) + " causal " + std::to_string(c.causal) + " window " +
                     std::to_string(c.left) + "," + std::to_string(c.right) + " softcap " +
                     std::to_string(c.softcap));
        const int64_t diagonal = i + 1;
        const int64_t right = c.causal ? 0 : c.right;
        double m = -INFINITY, sum = 0, weighted = 0;
        double s[3];
        for (int64_t j = 0; j < 3; ++j) {
          const bool seen = (c.left < 0 || j >= diagonal - c.left) && (right < 0 || j <= diagonal + right);
          s[j] = !seen ? -INFINITY : c.softcap > 0 ? c.softcap * std::tanh(x[j] / c.softcap) : x[j];
          m = std::max(m, s[j]);
        }
        for (int64_t j = 0; j < 3; ++j) {
          const double e = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - m);
          sum += e;
          weighted += e * static_cast<double>(j + 1);
        }
        if (sum == 0) {
          EXPECT_EQ(lse[i], -INFINITY);
          EXPECT_EQ(o[i * 32], 0.0);
        } else {
          EXPECT_NEAR(lse[i], m + std::log(sum), 1e-12);
          EXPECT_NEAR(o[i * 32], weighted / sum, 1e-12);
        }
        for (int d = 1; d < 32; ++d) EXPECT_EQ(o[i * 32 + d], 0.0);
      }
    }
  }
}

// The references are dense-only: cpu_attention refuses varlen and paged calls.
TEST(CpuReference, RejectsVarlenAndPagedCalls) {
  AttentionParams p;
  p.dtype = DType::kBFloat16;
  p.batch = 1;
  p.seqlen_q = 1;
  p.seqlen_k = 1;
  p.heads_q = 1;
  p.heads_kv = 1;
  p.head_dim = 32;
  p.set_contiguous_bnhd();
  const int32_t lengths[2] = {0, 1};
  std::vector<uint16_t> data(32, 0);
  for (int field = 0; field < 4; ++field) {
    AttentionParams f = p;
    (field == 0 ? f.cu_seqlens_q : field == 1 ? f.cu_seqlens_k : field == 2 ? f.seqused_k : f.block_table) = lengths;
    std::vector<double> o{1.0}, lse{1.0};
    const flash::Status s = flash::ref::cpu_attention(f, data.data(), data.data(), data.data(), &o, &lse);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << "field " << field;
    EXPECT_NE(std::string(s.message).find("dense-only"), std::string::npos) << s.message;
    EXPECT_TRUE(o.empty() && lse.empty());
  }
}

}  // namespace
