// Attention sinks (AttentionParams::sinks) and ALiBi (alibi_slopes),
// apart and together, against the per-sequence reference, whose softmax
// carries each head's sink as one more logit with no V row and adds
// -slope * |i + d - j| to each score: every mask (none, causal, the gpt-oss
// window, softcap), dense, varlen, seqused_k and paged caches, decode
// shapes, and split-KV on each kernel (the combine must count a sink
// once). Heads mix sinks well below, near and above the rows' log-sum-exp
// (about log(keys)), and -inf (off); ALiBi slopes are the usual 2^(-8h/H).
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

// heads_q sinks cycling through values from off to dominant.
std::vector<float> sinks_for(int64_t heads_q, int shift) {
  const float values[] = {-INFINITY, 0.5f, 4.f, 7.5f, -2.f, 10.f, 3.f, 6.f};
  std::vector<float> s;
  for (int64_t h = 0; h < heads_q; ++h) s.push_back(values[(h + shift) % 8]);
  return s;
}

// heads_q ALiBi slopes 2^(-8 (h + 1) / heads_q), rotated by `shift`.
std::vector<float> alibi_for(int64_t heads_q, int shift) {
  std::vector<float> s;
  for (int64_t h = 0; h < heads_q; ++h) {
    const int64_t k = (h + shift) % heads_q + 1;
    s.push_back(std::exp2(-8.f * static_cast<float>(k) / static_cast<float>(heads_q)));
  }
  return s;
}

enum class Feature { kSinks, kAlibi, kBoth };
const char* feature_name(Feature f) {
  return f == Feature::kSinks ? "sinks" : f == Feature::kAlibi ? "alibi" : "sinks_alibi";
}
void set_feature(FeatureConfig* cfg, Feature f, int shift) {
  if (f != Feature::kAlibi) cfg->sinks = sinks_for(cfg->heads_q, shift);
  if (f != Feature::kSinks) cfg->alibi = alibi_for(cfg->heads_q, shift);
}

constexpr MaskCase kMasks[] = {
    {"none", false, -1, -1, 0.f},
    {"causal", true, -1, -1, 0.f},
    {"window128", false, 128, 0, 0.f},  // gpt-oss's sliding layers
    {"softcap", true, -1, -1, 30.f},
};

std::vector<FeatureRow> feature_rows(Feature feature) {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 7000 + 1000 * static_cast<uint64_t>(feature);
  const std::string suffix = std::string("_") + feature_name(feature);
  // Both together: head dim 128 only.
  const bool both = feature == Feature::kBoth;
  int variant = 0;
  // Dense prefill: more keys than queries, and more queries than keys (rows
  // near the top see no key under a causal mask: their LSE is the sink).
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd) || (both && hd != 128)) continue;
    for (const MaskCase& m : kMasks) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      m.apply(&cfg);
      const bool tall = variant % 3 == 0;
      cfg.seqlens_q = repeat(tall ? 1000 : 300, 1);
      cfg.seqlens_k = repeat(tall ? 300 : 1000, 1);
      set_feature(&cfg, feature, variant);
      cfg.with_lse = variant % 5 != 4;
      t.add(std::string("dense_") + m.name + suffix, cfg, prefill_split_runs(true));
    }
  }
  // ALiBi's tensor-core form (causal, with or without a left window, no
  // LSE, unsplit, head dim 64; the Hopper kernel's AlibiCausalTraits):
  // keys past and short of the query count, a long row (4000 keys: a * k up to 127 a per block, far from
  // the diagonal), both dtypes, fp16 with a softmax scale that puts a =
  // slope / scale past fp16's range, varlen with empty sequences, and with
  // sinks (whose weight the rows' shifts set).
  if (feature == Feature::kBoth && head_dim_compiled(64)) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 64, 8, 2, seed++);
    cfg.causal = true;
    cfg.seqlens_q = repeat(300, 1);
    cfg.seqlens_k = repeat(1000, 1);
    cfg.with_lse = false;
    set_feature(&cfg, feature, 3);
    t.add("dense_causal_nolse_hd64" + suffix, cfg);
  }
  if (feature == Feature::kAlibi && head_dim_compiled(64)) {
    {
      FeatureConfig cfg = make_config(DType::kFloat16, 64, 8, 2, seed++);
      cfg.causal = true;
      cfg.seqlens_q = repeat(200, 1);
      cfg.seqlens_k = repeat(600, 1);
      cfg.with_lse = false;
      cfg.softmax_scale = 1e-6f;  // a up to 0.5 / 1e-6, past fp16's 65504
      set_feature(&cfg, feature, 1);
      t.add("dense_causal_nolse_tiny_scale_fp16" + suffix, cfg);
    }
    struct Shape {
      int64_t q, k;
    };
    int shift = 0;
    for (const Shape& shape : {Shape{300, 1000}, Shape{1000, 300}, Shape{256, 4000}}) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
        FeatureConfig cfg = make_config(dtype, 64, 8, 2, seed++);
        cfg.causal = true;
        cfg.seqlens_q = repeat(shape.q, 1);
        cfg.seqlens_k = repeat(shape.k, 1);
        cfg.with_lse = false;
        set_feature(&cfg, feature, shift++);
        t.add("dense_causal_nolse_q" + std::to_string(shape.q) + "_k" + std::to_string(shape.k) +
                  (dtype == DType::kFloat16 ? "_fp16" : "_bf16") + suffix,
              cfg);
      }
    }
    // The same form under a left window (gpt-oss's sliding layers):
    // windows of 0, 1, 100, 128 and 300 keys, spelled causal + left edge
    // and (128) as the window (128, 0); rows whose window starts inside,
    // at and before a key block.
    struct Window {
      int64_t left, right;  // right -1: causal
      int64_t q, k;
    };
    for (const Window& w : {Window{0, -1, 300, 1000}, Window{1, -1, 1000, 300}, Window{100, -1, 700, 700},
                            Window{128, -1, 256, 4000}, Window{128, 0, 1000, 1000}, Window{300, -1, 600, 900}}) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
        FeatureConfig cfg = make_config(dtype, 64, 8, 2, seed++);
        cfg.causal = w.right < 0;
        cfg.window_left = w.left;
        cfg.window_right = w.right;
        cfg.seqlens_q = repeat(w.q, 1);
        cfg.seqlens_k = repeat(w.k, 1);
        cfg.with_lse = false;
        set_feature(&cfg, feature, shift++);
        t.add("dense_window" + std::to_string(w.left) + (w.right < 0 ? "_causal" : "_right0") + "_nolse_q" +
                  std::to_string(w.q) + "_k" + std::to_string(w.k) + (dtype == DType::kFloat16 ? "_fp16" : "_bf16") +
                  suffix,
              cfg);
      }
    }
    {
      FeatureConfig cfg = make_config(DType::kFloat16, 64, 8, 2, seed++);
      cfg.causal = true;
      cfg.window_left = 128;
      cfg.seqlens_q = repeat(200, 1);
      cfg.seqlens_k = repeat(600, 1);
      cfg.with_lse = false;
      cfg.softmax_scale = 1e-6f;
      set_feature(&cfg, feature, shift++);
      t.add("dense_window128_nolse_tiny_scale_fp16" + suffix, cfg);
    }
    {
      FeatureConfig cfg = make_config(DType::kBFloat16, 64, 8, 2, seed++);
      cfg.causal = true;
      cfg.window_left = 128;
      cfg.varlen_q = true;
      cfg.seqlens_q = rotated(3);
      cfg.seqlens_k = rotated(5);
      cfg.kv = KvLayout::kVarlen;
      cfg.with_lse = false;
      set_feature(&cfg, feature, shift++);
      t.add("varlen_window128_nolse" + suffix, cfg);
    }
    FeatureConfig cfg = make_config(DType::kBFloat16, 64, 8, 2, seed++);
    cfg.causal = true;
    cfg.varlen_q = true;
    cfg.seqlens_q = rotated(2);
    cfg.seqlens_k = rotated(4);
    cfg.kv = KvLayout::kVarlen;
    cfg.with_lse = false;
    set_feature(&cfg, feature, shift);
    t.add("varlen_causal_nolse" + suffix, cfg);
  }
  // Varlen Q and K with empty sequences and rows that see no key.
  for (int shift = 0; shift < 2; ++shift) {
    const int64_t hd = shift == 0 ? 128 : 64;
    if (!head_dim_compiled(hd)) continue;
    FeatureConfig cfg = make_config(shift ? DType::kFloat16 : DType::kBFloat16, hd, 8, 2, seed++);
    cfg.causal = shift == 0;
    cfg.varlen_q = true;
    cfg.seqlens_q = rotated(shift + 1);
    cfg.seqlens_k = rotated(shift + 3);
    cfg.kv = KvLayout::kVarlen;
    set_feature(&cfg, feature, shift);
    t.add("varlen" + suffix, cfg);
  }
  // KV caches: seqused_k, pages of 16 keys (the Hopper kernel) and of 1 key
  // (sm80), chunked prefill and decode shapes, with their split runs.
  struct Cache {
    const char* name;
    KvLayout kv;
    int64_t page_size;
  };
  const Cache caches[] = {
      {"seqused", KvLayout::kDense, 0}, {"pages16", KvLayout::kPaged, 16}, {"pages1", KvLayout::kPaged, 1}};
  for (const Cache& cache : caches) {
    for (int64_t seqlen_q : {1, 4, 200}) {
      ++variant;
      if (both && seqlen_q == 4) continue;
      const int64_t hd = variant % 2 ? 128 : 64;
      if (!head_dim_compiled(hd)) continue;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 16, 4, seed++);
      cfg.causal = seqlen_q > 1;
      cfg.seqlens_q = repeat(seqlen_q, 2);
      cfg.seqlens_k = {1500, 700};
      cfg.kv = cache.kv;
      cfg.use_seqused_k = true;
      if (cache.kv == KvLayout::kDense) cfg.k_capacity = 1600;
      if (cache.kv == KvLayout::kPaged) cfg.page_size = cache.page_size;
      set_feature(&cfg, feature, variant);
      t.add("q" + std::to_string(seqlen_q) + "_" + cache.name + suffix, cfg,
            seqlen_q <= 16 ? decode_runs() : prefill_split_runs(true));
    }
  }
  return t.rows();
}

std::vector<FeatureRow> all_rows() {
  std::vector<FeatureRow> rows;
  for (Feature f : {Feature::kSinks, Feature::kAlibi, Feature::kBoth}) {
    const std::vector<FeatureRow> part = feature_rows(f);
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

class SinksAlibi : public FeatureTest {};
TEST_P(SinksAlibi, MatchesReference) {
  // The Hopper kernel splits dense calls too: three splits asked of it.
  check_case(row_config(), GetParam().runs,
             [this](FeatureCase& c, const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
               expect_sm90_splits(c, 3, ref_o, ref_lse);
             });
}
INSTANTIATE_TEST_SUITE_P(Features, SinksAlibi, ::testing::ValuesIn(all_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SinksAlibi);

// The premise: each feature changes the result. The same case's reference
// with and without it differs in O and in the LSE (by more than
// `lse_change`), and flash run without it fails the reference with it.
class SinksPremise : public FeatureFixture {
 protected:
  void expect_feature_matters(Feature feature, uint64_t seed, double lse_change) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 8, 2, case_seed(kFeatureSeedBase + seed));
    cfg.causal = feature == Feature::kSinks;
    cfg.seqlens_q = repeat(300, 1);
    cfg.seqlens_k = repeat(1000, 1);
    set_feature(&cfg, feature, 0);
    FeatureConfig plain = cfg;
    plain.sinks.clear();
    plain.alibi.clear();
    FeatureCase with(cfg, stream_), without(plain, stream_);
    ASSERT_TRUE(with.init());
    ASSERT_TRUE(without.init());
    std::vector<double> o_with, lse_with, o_without, lse_without;
    ASSERT_TRUE(reference(with, &o_with, &lse_with));
    ASSERT_TRUE(reference(without, &o_without, &lse_without));
    EXPECT_GT(relative_l2(o_without, o_with), 0.1);
    EXPECT_GT(relative_l2(lse_without, lse_with), lse_change);
    // flash without the feature, checked against the reference with it.
    AttentionParams p = with.params();
    p.sinks = nullptr;
    p.alibi_slopes = nullptr;
    ASSERT_TRUE(with.run(p).ok());
    std::vector<float> o, lse;
    ASSERT_TRUE(with.read_output(&o, &lse));
    Errors errors;
    EXPECT_FALSE(check_attention(with.check_params(), o, lse, o_with, lse_with, &errors));
  }
};

TEST_F(SinksPremise, SinksChangeTheResult) {
  if (!head_dim_compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  expect_feature_matters(Feature::kSinks, 7999, 0.01);
}

TEST_F(SinksPremise, AlibiChangesTheResult) {
  if (!head_dim_compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  expect_feature_matters(Feature::kAlibi, 7998, 0.1);
}

// The cuBLAS reference's sinks and ALiBi against the float64 CPU
// reference's, with rows that see no key (more queries than keys under a causal mask or a
// window: their LSE is the sink, or -inf where the sink is off) and varlen
// sequences with no key at all.
TEST_F(SinksPremise, CublasReferenceMatchesFloat64) {
  if (!head_dim_compiled(64)) GTEST_SKIP() << "head_dim 64 not compiled";
  struct Variant {
    bool causal;
    int64_t left, right;
    float softcap;
  };
  const Variant variants[] = {{false, -1, -1, 0.f}, {true, -1, -1, 0.f}, {false, 8, 0, 0.f}, {true, -1, -1, 5.f}};
  int64_t rows_without_keys = 0;
  int shift = 0;
  for (const Variant& v : variants) {
    for (bool varlen : {false, true}) {
      FeatureConfig cfg = make_config(shift % 2 ? DType::kFloat16 : DType::kBFloat16, 64, 8, 2,
                                      case_seed(kFeatureSeedBase + 7100 + static_cast<uint64_t>(shift)));
      cfg.causal = v.causal;
      cfg.window_left = v.left;
      cfg.window_right = v.right;
      cfg.softcap = v.softcap;
      cfg.input_scale = v.softcap > 0.f ? 3.f : 1.f;
      if (varlen) {
        cfg.varlen_q = true;
        cfg.kv = KvLayout::kVarlen;
        cfg.seqlens_q = {77, 0, 20, 5};
        cfg.seqlens_k = {33, 9, 0, 40};
      } else {
        cfg.seqlens_q = repeat(77, 2);
        cfg.seqlens_k = repeat(33, 2);
      }
      cfg.sinks = sinks_for(cfg.heads_q, shift);
      cfg.alibi = alibi_for(cfg.heads_q, shift++);
      SCOPED_TRACE(cfg.name());
      FeatureCase c(cfg, stream_);
      ASSERT_TRUE(c.init());
      std::vector<double> gpu_o, gpu_lse, cpu_o, cpu_lse;
      ASSERT_TRUE(c.reference(cublas_, &gpu_o, &gpu_lse, SequenceReference::kCublas));
      ASSERT_TRUE(c.reference(cublas_, &cpu_o, &cpu_lse, SequenceReference::kCpu));
      const std::vector<float> o(gpu_o.begin(), gpu_o.end()), lse(gpu_lse.begin(), gpu_lse.end());
      Errors errors;
      EXPECT_TRUE(check_attention(c.check_params(), o, lse, cpu_o, cpu_lse, &errors));
      rows_without_keys += rows_seeing_no_key(cfg);
    }
  }
  EXPECT_GT(rows_without_keys, 0) << "the premise: some rows see no key";
}

}  // namespace
}  // namespace flash::test
