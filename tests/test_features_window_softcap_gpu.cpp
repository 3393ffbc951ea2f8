// Sliding windows and softcap against the per-sequence reference, dense
// and varlen. See feature_test.h for the backends each row runs on.
#include <string>
#include <utility>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

// ---------------------------------------------------------------- SlidingWindow

struct Window {
  bool causal;
  int64_t left, right;
};
constexpr Window kWindows[] = {
    {false, 128, 0}, {false, 0, 0},  {false, 64, 64},
    {false, -1, 32}, {false, 5, -1}, {true, 128, -1},  // causal with a left window: window_right -1 means 0
    {true, 7, 0},    {true, -1, 0},                    // causal spelled twice
    {false, -1, 0},                                    // causal spelled as a window
};

// Every window on dense shapes with more keys than queries, fewer (so rows
// near the top see no key: d = -700), and equal, then on ragged varlen
// batches; head dim 256 with a two-sided window; then windows several
// Hopper K/V blocks wide (64-176 keys) on long rows, so a tile's visible
// blocks start past block 0, some are unmasked and the mask cuts both
// edges, windows of fewer keys than a block, and rows near the top with no
// key (more queries than keys).
std::vector<FeatureRow> window_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const std::pair<int64_t, int64_t> shapes[] = {{300, 1000}, {1000, 300}, {257, 257}};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (const Window& w : kWindows) {
        const auto [seqlen_q, seqlen_k] = shapes[variant++ % 3];
        FeatureConfig cfg = make_config(dtype, hd, 4, 2, seed++);
        cfg.causal = w.causal;
        cfg.window_left = w.left;
        cfg.window_right = w.right;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        cfg.seqlens_k = repeat(seqlen_k, 2);
        cfg.padded = variant % 4 == 0;
        t.add("q" + std::to_string(seqlen_q) + "_k" + std::to_string(seqlen_k), cfg);
      }
    }
  }
  int index = 0;
  for (const Window& w : kWindows) {
    ++index;
    const int64_t hd = index % 2 && head_dim_compiled(64) ? 64 : 128;
    if (!head_dim_compiled(hd)) continue;
    FeatureConfig cfg = make_config(index % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
    cfg.causal = w.causal;
    cfg.window_left = w.left;
    cfg.window_right = w.right;
    cfg.varlen_q = true;
    cfg.seqlens_q = rotated(index);
    cfg.seqlens_k = rotated(index + 2);
    cfg.kv = KvLayout::kVarlen;
    t.add("varlen", cfg);
  }
  if (head_dim_compiled(256)) {
    FeatureConfig cfg = make_config(DType::kFloat16, 256, 4, 4, seed++);
    cfg.window_left = 64;
    cfg.window_right = 64;
    cfg.seqlens_q = repeat(1000, 1);
    cfg.seqlens_k = repeat(300, 1);
    t.add("q1000_k300", cfg);
  }
  const Window long_windows[] = {{false, 700, 0}, {false, 300, 300}, {true, 1000, 0}, {false, 33, 17}, {false, 0, 900}};
  const std::pair<int64_t, int64_t> long_shapes[] = {{2049, 2049}, {1500, 3000}, {2500, 1200}};
  variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (const Window& w : long_windows) {
      const auto [seqlen_q, seqlen_k] = long_shapes[variant % 3];
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 4, 2, seed++);
      cfg.causal = w.causal;
      cfg.window_left = w.left;
      cfg.window_right = w.right;
      cfg.seqlens_q = repeat(seqlen_q, 1);
      cfg.seqlens_k = repeat(seqlen_k, 1);
      cfg.with_lse = variant % 3 != 1;
      t.add("long_q" + std::to_string(seqlen_q) + "_k" + std::to_string(seqlen_k), cfg, {{Backend::kAuto}});
    }
  }
  return t.rows();
}

class SlidingWindow : public FeatureTest {};
TEST_P(SlidingWindow, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, SlidingWindow, ::testing::ValuesIn(window_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SlidingWindow);

TEST(FeatureTables, SlidingWindowHasRowsSeeingNoKey) {
  int64_t rows = 0;
  for (const FeatureRow& row : window_rows()) rows += rows_seeing_no_key(row.cfg);
  EXPECT_GT(rows, 0) << "the premise: some windowed rows see no key";
}

// ---------------------------------------------------------------- Softcap

// Softcap 30 and 5 with inputs large enough that the cap changes the result
// (checked on every row: the uncapped reference is far off), causal and
// not, on shapes with one query row, square, and more queries than keys.
std::vector<FeatureRow> softcap_rows() {
  struct Cap {
    float softcap, input_scale;
  };
  struct Shape {
    int64_t q, k, batch;
  };
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const Cap caps[] = {{30.f, 5.f}, {5.f, 3.f}};
  const Shape shapes[] = {{200, 200, 2}, {1, 777, 3}, {333, 64, 2}};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (const Cap& cap : caps) {
        for (bool causal : {false, true}) {
          const Shape& shape = shapes[variant++ % 3];
          FeatureConfig cfg = make_config(dtype, hd, 4, 2, seed++);
          cfg.causal = causal;
          cfg.softcap = cap.softcap;
          cfg.input_scale = cap.input_scale;
          cfg.seqlens_q = repeat(shape.q, static_cast<size_t>(shape.batch));
          cfg.seqlens_k = repeat(shape.k, static_cast<size_t>(shape.batch));
          t.add("q" + std::to_string(shape.q) + "_k" + std::to_string(shape.k), cfg);
        }
      }
    }
  }
  return t.rows();
}

// Then with an explicit softmax_scale, and on a varlen batch.
std::vector<FeatureRow> softcap_more_rows() {
  FeatureTable t;
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) return t.rows();
  uint64_t seed = kFeatureSeedBase + softcap_rows().size();
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    FeatureConfig scaled = make_config(dtype, hd, 8, 8, seed++);
    scaled.softcap = 10.f;
    scaled.softmax_scale = 0.25f;
    scaled.input_scale = 2.f;
    scaled.causal = dtype == DType::kBFloat16;
    scaled.seqlens_q = repeat(150, 2);
    scaled.seqlens_k = repeat(170, 2);
    t.add("scale0_25", scaled);

    FeatureConfig varlen = make_config(dtype, hd, 4, 1, seed++);
    varlen.softcap = 30.f;
    varlen.input_scale = 4.f;
    varlen.causal = dtype == DType::kFloat16;
    varlen.varlen_q = true;
    varlen.seqlens_q = rotated(1);
    varlen.seqlens_k = rotated(4);
    varlen.kv = KvLayout::kVarlen;
    t.add("varlen", varlen);
  }
  return t.rows();
}

class Softcap : public FeatureTest {};
TEST_P(Softcap, MatchesReference) {
  const FeatureConfig cfg = row_config();
  {
    // The premise: without the cap the result is far from the capped one.
    SCOPED_TRACE(cfg.name());
    FeatureConfig uncapped = cfg;
    uncapped.softcap = 0.f;
    FeatureCase a(cfg, stream_), b(uncapped, stream_);
    ASSERT_TRUE(a.init());
    ASSERT_TRUE(b.init());
    std::vector<double> o_a, lse_a, o_b, lse_b;
    ASSERT_TRUE(a.reference(cublas_, &o_a, &lse_a));
    ASSERT_TRUE(b.reference(cublas_, &o_b, &lse_b));
    EXPECT_GT(relative_l2(o_b, o_a), 5 * bounds_for(cfg.dtype).rel_l2) << "the cap hardly matters here";
  }
  check_case(cfg, GetParam().runs);
}
INSTANTIATE_TEST_SUITE_P(Features, Softcap, ::testing::ValuesIn(softcap_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Softcap);

class SoftcapScaledAndVarlen : public FeatureTest {};
TEST_P(SoftcapScaledAndVarlen, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, SoftcapScaledAndVarlen, ::testing::ValuesIn(softcap_more_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SoftcapScaledAndVarlen);

}  // namespace
}  // namespace flash::test
