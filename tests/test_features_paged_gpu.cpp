// KV caches against the per-sequence reference: paged caches with shuffled
// pages, dense caches with seqused_k (clamped to the allocation), paged and
// varlen calls combined with windows and softcap, and what Backend::kSm90
// refuses. See feature_test.h for the backends each row runs on.
#include <cmath>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "feature_test.h"
#include "kernels/sm80/api.h"
#include "reference.h"
#include "src/dispatch.h"

namespace flash::test {
namespace {

// ---------------------------------------------------------------- PagedKv

// Pages of 1 (token-level), 16, 24, 48, 64 and 256 keys in a random order, ragged
// seqused_k (incl. 0 and 1), with dense Q (decode and short prefill) and with
// varlen Q (chunked prefill); block tables with spare entries (-1) and a
// batch stride past max_pages_per_seq. Then the Hopper kernel's tiles and
// producer warps at every head dim, without seqused_k, seqlen_k passed as
// the allocation, and head dim 256.
// Chunked prefill on a paged cache read through seqused_k: varlen queries
// of tile_rotated(shift) lengths, each sequence's keys its queries plus
// tile_rotated(shift + 3).
FeatureConfig chunked_paged(DType dtype, int64_t head_dim, int shift, uint64_t seed_index, int64_t page_size) {
  FeatureConfig cfg = make_config(dtype, head_dim, 8, 2, seed_index);
  cfg.varlen_q = true;
  cfg.seqlens_q = tile_rotated(shift);
  cfg.seqlens_k = tile_rotated(shift + 3);
  for (size_t i = 0; i < cfg.seqlens_k.size(); ++i) cfg.seqlens_k[i] += cfg.seqlens_q[i];
  cfg.kv = KvLayout::kPaged;
  cfg.use_seqused_k = true;
  cfg.page_size = page_size;
  return cfg;
}

std::vector<FeatureRow> paged_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const int64_t dense_rows[] = {1, 3, 16, 77};
  int variant = 0;
  for (int64_t page_size : {1, 16, 24, 48, 64, 256}) {
    const std::string pages = "pages" + std::to_string(page_size);
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (int64_t hd : {64, 128}) {
        if (!head_dim_compiled(hd)) continue;
        ++variant;
        FeatureConfig dense_q = make_config(dtype, hd, variant % 2 ? 8 : 16, variant % 2 ? 2 : 4, seed++);
        dense_q.causal = variant % 2 == 0;
        dense_q.seqlens_k = rotated(variant);
        dense_q.seqlens_q = repeat(dense_rows[variant % 4], kNumLengths);
        dense_q.kv = KvLayout::kPaged;
        dense_q.use_seqused_k = true;
        dense_q.page_size = page_size;
        dense_q.spare_table_entries = variant % 3;
        dense_q.table_stride_pad = (variant % 2) * 5;
        dense_q.padded = variant % 3 == 0;
        t.add("dense_q_" + pages, dense_q);

        FeatureConfig chunked = make_config(dtype, hd, 8, 8, seed++);
        chunked.causal = variant % 2 == 1;
        chunked.varlen_q = true;
        chunked.seqlens_q = rotated(variant + 2);
        chunked.seqlens_k = rotated(variant + 5);
        chunked.kv = KvLayout::kPaged;
        chunked.use_seqused_k = true;
        chunked.page_size = page_size;
        chunked.spare_pages = 7;
        chunked.with_lse = variant % 3 != 2;
        t.add("chunked_" + pages, chunked);
      }
    }
  }
  // Chunked prefill as the Hopper kernel's KV-cache path sees it: lengths
  // around its 64- to 192-row tiles and 64- to 128-key blocks, pages of 8
  // (8-row TMA boxes; gathered at head dim 256) and 128 keys (one box a
  // column block, so some producer warps have none), and pages of
  // 1 and 3 (gathered row by row), every Hopper head dim, with masks.
  for (int64_t page_size : {1, 3, 8, 128}) {
    for (int64_t hd : {64, 96, 128, 192, 256}) {
      if (!head_dim_compiled(hd)) continue;
      ++variant;
      FeatureConfig cfg =
          chunked_paged(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, variant, seed++, page_size);
      cfg.causal = variant % 3 != 0;
      if (variant % 3 == 2) cfg.window_left = 100;
      if (hd == 128) cfg.softcap = 20.f;
      cfg.with_lse = variant % 2 == 0;
      t.add("chunked_tiles_pages" + std::to_string(page_size), cfg);
    }
  }
  // Head dims 64 and 256 gather pages on a kernel of their own
  // (gather_tile: 96-key blocks at 64, candidate 0's tile at 256): its
  // score-modifier kernels, ALiBi alone (no left window edge) and ALiBi
  // with a softcap and a window.
  for (int64_t hd : {64, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (int mods = 0; mods < 2; ++mods) {
      ++variant;
      FeatureConfig cfg = chunked_paged(mods ? DType::kBFloat16 : DType::kFloat16, hd, variant, seed++, mods ? 3 : 1);
      cfg.causal = true;
      for (int64_t h = 0; h < cfg.heads_q; ++h) {
        cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
      }
      if (mods) {
        cfg.softcap = 20.f;
        cfg.window_left = 100;
      }
      cfg.with_lse = mods == 1;  // the kernels with and without float32 row sums
      t.add("gather_score_mods_pages" + std::to_string(cfg.page_size), cfg);
    }
  }
  // The Hopper KV-cache producer's warps (CacheProducer) at every head dim:
  // pages of 16 and 32 keys make 2 to 16 boxes a column block, shared by up
  // to four warps; ragged with seqused_k (16) and equal lengths without it,
  // pages shuffled (32). At head dim 256 the 16-key pages are gathered
  // (GatherProducer, whole blocks and the ragged last one).
  for (int64_t page_size : {16, 32}) {
    for (int64_t hd : {64, 96, 128, 192, 256}) {
      if (!head_dim_compiled(hd)) continue;
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      cfg.kv = KvLayout::kPaged;
      cfg.page_size = page_size;
      cfg.causal = variant % 2 == 0;
      if (page_size == 16) {
        cfg.varlen_q = true;
        cfg.seqlens_q = tile_rotated(variant);
        cfg.seqlens_k = tile_rotated(variant + 3);
        for (size_t i = 0; i < cfg.seqlens_k.size(); ++i) cfg.seqlens_k[i] += cfg.seqlens_q[i];
        cfg.use_seqused_k = true;
      } else {
        cfg.seqlens_q = repeat(40, 3);
        cfg.seqlens_k = repeat(300, 3);
        cfg.shuffle_pages = true;
      }
      t.add("producer_warps_pages" + std::to_string(page_size), cfg);
    }
  }
  // Without seqused_k every sequence has seqlen_k keys (not a multiple of the
  // page size here); pages in order, and shuffled.
  for (int64_t page_size : {16, 48, 64, 256}) {
    const int64_t hd = head_dim_compiled(128) ? 128 : 64;
    if (!head_dim_compiled(hd)) break;
    FeatureConfig cfg = make_config(page_size == 48 ? DType::kFloat16 : DType::kBFloat16, hd, 8, 2, seed++);
    cfg.causal = page_size != 64;
    cfg.seqlens_q = repeat(40, 3);
    cfg.seqlens_k = repeat(300, 3);
    cfg.kv = KvLayout::kPaged;
    cfg.page_size = page_size;
    cfg.shuffle_pages = page_size != 16;
    t.add("no_seqused_k_pages" + std::to_string(page_size), cfg);
  }
  // seqlen_k passed as the allocation (max_pages_per_seq * page_size) rather
  // than the longest sequence: only seqused_k decides the keys.
  if (head_dim_compiled(128)) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 8, 2, seed++);
    cfg.seqlens_q = repeat(4, 4);
    cfg.seqlens_k = {100, 0, 7, 250};
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 64;
    cfg.spare_table_entries = 2;
    cfg.seqlen_k_hint = (4 + 2) * 64;
    t.add("seqlen_k_is_allocation", cfg);
  }
  if (head_dim_compiled(256)) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 256, 8, 2, seed++);
    cfg.causal = true;
    cfg.seqlens_q = repeat(16, kNumLengths);
    cfg.seqlens_k = rotated(3);
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 48;
    t.add("dense_q_pages48", cfg);
  }
  return t.rows();
}

class PagedKv : public FeatureTest {};
TEST_P(PagedKv, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, PagedKv, ::testing::ValuesIn(paged_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PagedKv);

// ---------------------------------------------------------------- DenseSequsedK

// A dense cache allocated for 1100 keys per sequence holding fewer (the rest
// NaN), for decode and prefill-shaped queries, MQA and GQA.
std::vector<FeatureRow> dense_seqused_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const int64_t rows[] = {1, 33, 128};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (bool causal : {false, true}) {
        ++variant;
        FeatureConfig cfg = make_config(dtype, hd, variant % 2 ? 8 : 4, variant % 2 ? 1 : 2, seed++);
        cfg.causal = causal;
        cfg.seqlens_q = repeat(rows[variant % 3], kNumLengths);
        cfg.seqlens_k = rotated(variant);
        cfg.kv = KvLayout::kDense;
        cfg.use_seqused_k = true;
        cfg.k_capacity = 1100;
        cfg.padded = variant % 3 == 1;
        t.add("q" + std::to_string(rows[variant % 3]), cfg);
      }
    }
  }
  return t.rows();
}

class DenseSequsedK : public FeatureTest {};
TEST_P(DenseSequsedK, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, DenseSequsedK, ::testing::ValuesIn(dense_seqused_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(DenseSequsedK);

// seqused_k past the allocation is clamped to it (AttentionParams: "Values
// are clamped to that allocation").
class SequsedK : public FeatureFixture {};
TEST_F(SequsedK, IsClampedToTheAllocation) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kFloat16, hd, 4, 2, case_seed(kFeatureSeedBase));
  cfg.seqlens_q = repeat(9, 3);
  cfg.seqlens_k = {300, 17, 300};  // what the reference uses
  cfg.kv = KvLayout::kDense;
  cfg.use_seqused_k = true;
  cfg.k_capacity = 300;
  cfg.causal = true;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));
  const int32_t seqused[] = {5000, 17, 301};  // what flash gets
  ASSERT_EQ(ref::upload_sync(c.seqused_k_device(), seqused, sizeof(seqused), stream_), cudaSuccess);
  for (const FlashRun& run : all_backends()) {
    expect_run_matches(c, run, ref_o, ref_lse);
    if (HasFatalFailure()) return;
  }
  expect_sm90(c, c.params(), ref_o, ref_lse);  // seqused_k on a dense cache: the Hopper kernel clamps too
}

// ---------------------------------------------------------------- Combined

// Paged + window + softcap + GQA (decode and chunked prefill), and varlen
// + window + softcap, every head dim of 64, 128, 256 compiled.
std::vector<FeatureRow> combined_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128, 256}) {
      if (!head_dim_compiled(hd)) continue;
      ++variant;
      FeatureConfig decode = make_config(dtype, hd, 32, 8, seed++);
      decode.seqlens_q = repeat(16, kNumLengths);
      decode.seqlens_k = rotated(variant);
      decode.kv = KvLayout::kPaged;
      decode.use_seqused_k = true;
      decode.page_size = 48;
      decode.causal = true;
      decode.window_left = 128;
      decode.softcap = 30.f;
      decode.input_scale = 4.f;
      decode.padded = true;
      t.add("paged_decode", decode);

      FeatureConfig chunked = make_config(dtype, hd, 8, 1, seed++);
      chunked.varlen_q = true;
      chunked.seqlens_q = rotated(variant + 1);
      chunked.seqlens_k = rotated(variant + 4);
      chunked.kv = KvLayout::kPaged;
      chunked.use_seqused_k = true;
      chunked.page_size = 64;
      chunked.window_left = 64;
      chunked.window_right = 64;
      chunked.softcap = 5.f;
      chunked.input_scale = 3.f;
      t.add("paged_chunked", chunked);

      if (hd == 256) continue;
      FeatureConfig varlen = make_config(dtype, hd, 12, 4, seed++);
      varlen.varlen_q = true;
      varlen.seqlens_q = rotated(variant + 2);
      varlen.seqlens_k = rotated(variant + 6);
      varlen.kv = KvLayout::kVarlen;
      varlen.window_left = -1;
      varlen.window_right = 32;
      varlen.softcap = 30.f;
      varlen.input_scale = 4.f;
      varlen.padded = true;
      t.add("varlen", varlen);
    }
  }
  return t.rows();
}

class Combined : public FeatureTest {};
TEST_P(Combined, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, Combined, ::testing::ValuesIn(combined_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Combined);

// ---------------------------------------------------------------- PagedKvSm80Tiles

// Every sm80 tile reads a paged cache right, not only the one flash's plan
// picks: the autotuner may pick any candidate, and where candidate 0 does
// not fit (an A100 at head dim 256) the plan runs a fallback tile, 64 x 64
// with four warps, whose paged copies take two swizzle bases a thread
// (PagedKV::issue). On an H100 / H200 the plan never offers that tile, so
// this launches each compiled candidate itself, on token-level (causal,
// with an LSE) and 48-key pages (without), ragged, shuffled and padded.
class PagedKvSm80Tiles : public FeatureFixture {};
TEST_F(PagedKvSm80Tiles, EveryTileMatchesTheReference) {
  detail::DeviceCaps caps;
  const Status device = detail::query_device(&caps);
  ASSERT_TRUE(device.ok()) << device.message;
  int ran = 0;
  uint64_t seed = 9970;
  for (int64_t hd : {32, 64, 96, 128, 192, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (int64_t page_size : {1, 48}) {
      FeatureConfig cfg = make_config(page_size == 1 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      cfg.kv = KvLayout::kPaged;
      cfg.page_size = page_size;
      cfg.use_seqused_k = true;
      cfg.causal = page_size == 1;
      cfg.with_lse = page_size == 1;
      cfg.varlen_q = true;
      cfg.seqlens_q = {5, 130, 64};
      cfg.seqlens_k = {9, 260, 333};
      cfg.padded = true;  // padded strides and rows past the last sequence: padding_untouched() checks them
      cfg.tail_rows = 7;
      cfg.seed = case_seed(cfg.seed);
      check_case(cfg, {{Backend::kSm80, 0}},
                 [&](FeatureCase& c, const std::vector<double>& ref_o, const std::vector<double>& ref_lse) {
                   AttentionParams p = c.params();
                   p.backend = Backend::kSm80;
                   detail::Plan plan;
                   const Status planned = detail::make_plan(p, caps, &plan);
                   ASSERT_TRUE(planned.ok()) << planned.message;
                   for (int i = 0; i < sm80::num_candidates(hd); ++i) {
                     if (sm80::candidate_smem_bytes(hd, i) > caps.max_smem) continue;
                     SCOPED_TRACE("sm80 candidate " + std::to_string(i));
                     expect_launch_matches(c, plan, detail::Candidate{Backend::kSm80, i}, p, ref_o, ref_lse);
                     ++ran;
                   }
                 });
    }
  }
  if (ran == 0) GTEST_SKIP() << "no head dim compiled";
}

// ---------------------------------------------------------------- Sm90RefusesWhatItLacks

// What Backend::kSm90 lacks: varlen Q or K without total_q / total_k. Each
// gets kUnsupported and nothing is written (on any GPU: elsewhere kSm90 is
// unsupported anyway), and kAuto never picks it for them. A row's runs are
// unused; its name says which totals are taken away.
struct Refused {
  const char* name;
  bool varlen_q, varlen_k;
  bool drop_total_q, drop_total_k;
};
constexpr Refused kRefused[] = {
    {"varlen_q_without_total_q", true, false, true, false},
    {"varlen_k_without_total_k", false, true, false, true},
    {"varlen_without_totals", true, true, true, true},
    {"varlen_with_total_q_alone", true, true, false, true},
    {"varlen_with_total_k_alone", true, true, true, false},
};

void PrintTo(const Refused& r, std::ostream* os) { *os << r.name; }

class Sm90RefusesWhatItLacks : public FeatureFixture, public ::testing::WithParamInterface<Refused> {};
TEST_P(Sm90RefusesWhatItLacks, WritesNothing) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  const Refused& r = GetParam();
  uint64_t index = 0;
  while (std::string(kRefused[index].name) != r.name) ++index;
  FeatureConfig cfg = make_config(DType::kBFloat16, hd, 8, 2, case_seed(kFeatureSeedBase + index));
  cfg.seqlens_q = repeat(128, 2);
  cfg.seqlens_k = repeat(256, 2);
  cfg.varlen_q = r.varlen_q;
  cfg.kv = r.varlen_k ? KvLayout::kVarlen : KvLayout::kDense;
  SCOPED_TRACE(cfg.name() + (r.drop_total_q ? ", total_q not given" : "") +
               (r.drop_total_k ? ", total_k not given" : ""));
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  AttentionParams p = c.params();
  if (r.drop_total_q) p.total_q = 0;
  if (r.drop_total_k) p.total_k = 0;
  ASSERT_TRUE(uses_sm90_unsupported_feature(p));
  p.backend = Backend::kSm90;
  const Status s = c.run(p);
  EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
  EXPECT_TRUE(c.outputs_untouched());
  p.backend = Backend::kAuto;
  KernelChoice choice;
  const Status q = query_kernel_choice(p, &choice);
  ASSERT_TRUE(q.ok()) << q.message;
  EXPECT_NE(choice.backend, Backend::kSm90) << "kAuto picked " << choice.name << " for a call kSm90 refuses";
}
INSTANTIATE_TEST_SUITE_P(Features, Sm90RefusesWhatItLacks, ::testing::ValuesIn(kRefused),
                         [](const ::testing::TestParamInfo<Refused>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace flash::test
