// Head dims between the compiled ones (every multiple of 8 to 256 runs on
// the next compiled kernel, its extra columns zero-filled and never
// stored) and the compiled 192, against the per-sequence reference: dense
// prefill under each mask, with the Hopper kernel split too; varlen;
// seqused_k and paged caches in chunked-prefill and decode shapes with
// their split runs; sinks and ALiBi at 160 and 192 (the Hopper kernel's
// 112-key blocks). Half the rows pad every head and row of Q, K, V and O
// with NaN: a kernel that read a column of Q or K past head_dim would turn
// O to NaN, and one that stored a column past it would overwrite the
// padding (padding_untouched). This table cannot see a read of V past
// head_dim: it reaches only O's columns that are never stored.
#include <cmath>
#include <string>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

// Narrow and wide neighbours of each compiled head dim, and 192 itself.
constexpr int64_t kHeadDims[] = {8, 40, 80, 112, 160, 192, 224};

constexpr MaskCase kMasks[] = {
    {"none", false, -1, -1, 0.f},
    {"causal", true, -1, -1, 0.f},
    {"window", false, 96, 16, 0.f},
    {"softcap", true, -1, -1, 30.f},
};

std::vector<FeatureRow> all_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 9000;
  int variant = 0;
  for (int64_t hd : kHeadDims) {
    if (!head_dim_runs(hd)) continue;
    for (const MaskCase& m : kMasks) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      m.apply(&cfg);
      const bool tall = variant % 3 == 0;
      cfg.seqlens_q = repeat(tall ? 700 : 300, 1);
      cfg.seqlens_k = repeat(tall ? 300 : 700, 1);
      cfg.padded = variant % 2 == 0;
      cfg.with_lse = variant % 4 != 3;
      t.add(std::string("dense_") + m.name, cfg, prefill_split_runs(false));
    }
    if (hd == 160 || hd == 192) {
      // Sinks and ALiBi together, causal and not.
      for (bool causal : {false, true}) {
        ++variant;
        FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
        cfg.causal = causal;
        cfg.seqlens_q = repeat(causal ? 700 : 300, 1);
        cfg.seqlens_k = repeat(causal ? 300 : 700, 1);
        cfg.padded = variant % 2 == 0;
        for (int64_t h = 0; h < cfg.heads_q; ++h) {
          cfg.sinks.push_back(h % 3 == 0 ? -INFINITY : 0.5f * static_cast<float>(h));
          cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
        }
        t.add("dense_sinks_alibi", cfg, prefill_split_runs(false));
      }
    }
    {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      cfg.causal = true;
      cfg.varlen_q = true;
      cfg.seqlens_q = rotated(variant);
      cfg.seqlens_k = rotated(variant + 2);
      cfg.kv = KvLayout::kVarlen;
      cfg.padded = variant % 2 == 0;
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
      for (int64_t seqlen_q : {1, 130}) {
        ++variant;
        FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 16, 4, seed++);
        cfg.causal = seqlen_q > 1;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        cfg.seqlens_k = {900, 350};
        cfg.kv = cache.kv;
        cfg.use_seqused_k = true;
        if (cache.kv == KvLayout::kDense) cfg.k_capacity = 1000;
        if (cache.kv == KvLayout::kPaged) cfg.page_size = cache.page_size;
        cfg.padded = variant % 2 == 0;
        t.add("q" + std::to_string(seqlen_q) + "_" + cache.name, cfg,
              seqlen_q <= 16 ? decode_runs() : prefill_split_runs(false));
      }
    }
  }
  return t.rows();
}

class HeadDims : public FeatureTest {};
TEST_P(HeadDims, MatchesReference) {
  // The Hopper kernel splits dense calls too: three splits asked of it.
  check_case(row_config(), GetParam().runs,
             [this](FeatureCase& c, const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
               expect_sm90_splits(c, 3, ref_o, ref_lse);
             });
}
INSTANTIATE_TEST_SUITE_P(Features, HeadDims, ::testing::ValuesIn(all_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HeadDims);

}  // namespace
}  // namespace flash::test
