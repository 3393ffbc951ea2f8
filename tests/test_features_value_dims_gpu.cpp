// A V head dim of its own (AttentionParams::head_dim_v): the call runs on
// the kernel of the wider of head_dim and head_dim_v, with V's missing
// columns zero in its tiles and O's never stored. DeepSeek-V2/V3's prefill
// shape (192, 128) under every mask, with sinks and ALiBi, varlen, and
// seqused_k and paged caches in chunked-prefill and decode shapes with
// their split runs; then narrower V than QK off the compiled head dims
// (72, 40), V wider than QK (64, 128), and (128, 64).
//
// Every tensor's head stride is the wider of the two widths, so V's
// columns past head_dim_v are padding that holds NaN: a kernel that read
// one would turn O to NaN. O's columns past head_dim_v must stay unwritten
// (padding_untouched). Half the rows pad every head and row as well.
#include <cmath>
#include <string>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

struct Dims {
  int64_t qk, v;
  bool full;  // every mask and cache shape, else a dense, a varlen and a paged row
};
constexpr Dims kDims[] = {{192, 128, true}, {72, 40, false}, {64, 128, false}, {128, 64, false}};

constexpr MaskCase kMasks[] = {
    {"none", false, -1, -1, 0.f},
    {"causal", true, -1, -1, 0.f},
    {"window", false, 96, 16, 0.f},
    {"softcap", true, -1, -1, 30.f},
};

std::vector<FeatureRow> all_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 9500;
  int variant = 0;
  auto config = [&](int64_t heads_q, int64_t heads_kv, const Dims& d) {
    ++variant;
    FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, d.qk, heads_q, heads_kv, seed++);
    cfg.head_dim_v = d.v;
    cfg.padded = variant % 2 == 0;
    return cfg;
  };
  for (const Dims& d : kDims) {
    if (!head_dim_runs(d.qk) || !head_dim_runs(d.v)) continue;
    for (const MaskCase& m : kMasks) {
      if (!d.full && m.softcap != 0.f) continue;
      FeatureConfig cfg = config(8, 2, d);
      m.apply(&cfg);
      const bool tall = variant % 3 == 0;
      cfg.seqlens_q = repeat(tall ? 700 : 300, 1);
      cfg.seqlens_k = repeat(tall ? 300 : 700, 1);
      cfg.with_lse = variant % 4 != 3;
      t.add(std::string("dense_") + m.name, cfg, prefill_split_runs(false));
    }
    if (d.full) {
      for (bool causal : {false, true}) {
        FeatureConfig cfg = config(8, 2, d);
        cfg.causal = causal;
        cfg.seqlens_q = repeat(causal ? 700 : 300, 1);
        cfg.seqlens_k = repeat(causal ? 300 : 700, 1);
        for (int64_t h = 0; h < cfg.heads_q; ++h) {
          cfg.sinks.push_back(h % 3 == 0 ? -INFINITY : 0.5f * static_cast<float>(h));
          cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
        }
        t.add("dense_sinks_alibi", cfg, prefill_split_runs(false));
      }
    }
    {
      FeatureConfig cfg = config(8, 2, d);
      cfg.causal = true;
      cfg.varlen_q = true;
      cfg.seqlens_q = rotated(variant);
      cfg.seqlens_k = rotated(variant + 2);
      cfg.kv = KvLayout::kVarlen;
      t.add("varlen", cfg);
    }
    struct Cache {
      const char* name;
      KvLayout kv;
      int64_t page_size;
    };
    const Cache caches[] = {
        {"seqused", KvLayout::kDense, 0}, {"pages16", KvLayout::kPaged, 16}, {"pages3", KvLayout::kPaged, 3}};
    for (const Cache& cache : caches) {
      if (!d.full && cache.page_size != 16) continue;
      for (int64_t seqlen_q : {1, 130}) {
        FeatureConfig cfg = config(16, 4, d);
        cfg.causal = seqlen_q > 1;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        cfg.seqlens_k = {900, 350};
        cfg.kv = cache.kv;
        cfg.use_seqused_k = true;
        if (cache.kv == KvLayout::kDense) cfg.k_capacity = 1000;
        if (cache.kv == KvLayout::kPaged) cfg.page_size = cache.page_size;
        t.add("q" + std::to_string(seqlen_q) + "_" + cache.name, cfg,
              seqlen_q <= 16 ? decode_runs() : prefill_split_runs(false));
      }
    }
  }
  return t.rows();
}

class ValueHeadDims : public FeatureTest {};
TEST_P(ValueHeadDims, MatchesReference) {
  // The Hopper kernel splits dense calls too: three splits asked of it.
  check_case(row_config(), GetParam().runs,
             [this](FeatureCase& c, const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
               expect_sm90_splits(c, 3, ref_o, ref_lse);
             });
}
INSTANTIATE_TEST_SUITE_P(Features, ValueHeadDims, ::testing::ValuesIn(all_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ValueHeadDims);

}  // namespace
}  // namespace flash::test
