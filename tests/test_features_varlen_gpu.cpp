// Varlen prefill against the per-sequence reference: packed Q and/or K/V
// with ragged lengths, packed rows of neighbouring sequences, many short
// sequences, calls without total_q / total_k, and batches of empty
// sequences. See feature_test.h for the backends each row runs on.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "feature_test.h"

namespace flash::test {
namespace {

// ---------------------------------------------------------------- VarlenPrefill

// Q and K/V both packed with ragged lengths (kLengths, paired differently
// for q and k, so causal rows with no key appear), Q packed over a dense
// K/V, and dense Q over packed K/V; then, for head dims 64, 128 and 256
// (what the Hopper kernel has), causal and not, the lengths around its
// 128/192-row tiles (kTileLengths): packed Q and K/V, packed Q over a dense
// cache with seqused_k, and dense Q over packed K/V. total_q / total_k are
// always given (exact), so kSm90 runs every one of these on a Hopper GPU.
std::vector<FeatureRow> varlen_prefill_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (bool causal : {false, true}) {
        ++variant;
        const int64_t heads_q = variant % 2 ? 8 : 4, heads_kv = variant % 2 ? 2 : 4;

        FeatureConfig both = make_config(dtype, hd, heads_q, heads_kv, seed++);
        both.causal = causal;
        both.varlen_q = true;
        both.max_seqlen_q_slack = variant % 3 == 0 ? 29 : 0;
        both.seqlens_q = rotated(variant);
        both.seqlens_k = rotated(variant + 3);
        both.kv = KvLayout::kVarlen;
        both.padded = variant % 2 == 0;
        both.with_lse = variant % 4 != 3;
        t.add("both", both);

        FeatureConfig q_only = make_config(dtype, hd, 6, 2, seed++);
        q_only.causal = causal;
        q_only.varlen_q = true;
        q_only.seqlens_q = rotated(variant + 1);
        q_only.seqlens_k = repeat(129, kNumLengths);
        q_only.kv = KvLayout::kDense;
        q_only.padded = variant % 2 == 1;
        t.add("q_only", q_only);

        FeatureConfig k_only = make_config(dtype, hd, 4, 1, seed++);
        k_only.causal = causal;
        k_only.seqlens_q = repeat(65, kNumLengths);
        k_only.seqlens_k = rotated(variant + 5);
        k_only.kv = KvLayout::kVarlen;
        t.add("k_only", k_only);
      }
    }
  }
  if (head_dim_compiled(256)) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      FeatureConfig cfg = make_config(dtype, 256, 4, 2, seed++);
      cfg.causal = dtype == DType::kFloat16;
      cfg.varlen_q = true;
      cfg.seqlens_q = rotated(2);
      cfg.seqlens_k = rotated(6);
      cfg.kv = KvLayout::kVarlen;
      t.add("both", cfg);
    }
  }

  // Around the Hopper kernel's tiles.
  variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (bool causal : {false, true}) {
        ++variant;
        FeatureConfig both = make_config(dtype, hd, variant % 2 ? 8 : 4, variant % 2 ? 2 : 4, seed++);
        both.causal = causal;
        both.varlen_q = true;
        both.max_seqlen_q_slack = variant % 3 == 0 ? 61 : 0;
        both.seqlens_q = tile_rotated(variant);
        both.seqlens_k = tile_rotated(variant + 3);
        both.kv = KvLayout::kVarlen;
        both.padded = variant % 2 == 0;
        both.tail_rows = variant % 2 ? 37 : 0;
        both.with_lse = variant % 4 != 2;
        t.add("tiles_both", both);

        if (variant % 2) {
          // Chunked prefill over a dense cache: packed Q, seqused_k keys of
          // a cache allocated for 2100.
          FeatureConfig cache = make_config(dtype, hd, 8, 1, seed++);
          cache.causal = causal;
          cache.varlen_q = true;
          cache.seqlens_q = tile_rotated(variant + 1);
          cache.seqlens_k = tile_rotated(variant + 6);
          cache.kv = KvLayout::kDense;
          cache.use_seqused_k = true;
          cache.k_capacity = 2100;
          cache.tail_rows = 64;
          t.add("tiles_q_over_cache", cache);
        } else {
          FeatureConfig k_only = make_config(dtype, hd, 6, 3, seed++);
          k_only.causal = causal;
          k_only.seqlens_q = repeat(129, kNumTileLengths);
          k_only.seqlens_k = tile_rotated(variant + 2);
          k_only.kv = KvLayout::kVarlen;
          k_only.tail_rows = 19;
          t.add("tiles_k_only", k_only);
        }
      }
    }
  }
  return t.rows();
}

class VarlenPrefill : public FeatureTest {};
TEST_P(VarlenPrefill, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, VarlenPrefill, ::testing::ValuesIn(varlen_prefill_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VarlenPrefill);

TEST(FeatureTables, VarlenPrefillHasRowsSeeingNoKey) {
  int64_t rows = 0;
  for (const FeatureRow& row : varlen_prefill_rows()) rows += rows_seeing_no_key(row.cfg);
  EXPECT_GT(rows, 0) << "the premise: some causal rows see no key";
}

// ---------------------------------------------------------------- VarlenNeighbouringSequences

// The natural varlen layout: in packed Q and O the rows right after a short
// sequence (1, 5, 17, 127 rows: a fraction of a tile) are the next
// sequence's, and after the last sequence come rows that are no sequence's
// (tail_rows, NaN). A kernel that writes a whole tile would overwrite the
// next sequence's first rows (caught by the full comparison) or the tail
// (caught by the padding check); one that reads K/V past a sequence's keys
// reads the next sequence's keys (wrong result) or the NaN tail (NaN).
std::vector<FeatureRow> neighbouring_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const std::vector<int64_t> lengths_q = {1, 2049, 5, 129, 0, 17, 1000, 127};
  const std::vector<int64_t> lengths_k = {3, 2049, 17, 129, 64, 1, 1100, 127};
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool causal : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, seed++);
      cfg.causal = causal;
      cfg.varlen_q = true;
      cfg.seqlens_q = lengths_q;
      cfg.seqlens_k = lengths_k;
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 200;  // more than a tile: a whole tile past the last sequence stays unwritten
      cfg.padded = variant % 3 == 0;
      t.add("packed", cfg);
    }
  }
  return t.rows();
}

class VarlenNeighbouringSequences : public FeatureTest {};
TEST_P(VarlenNeighbouringSequences, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, VarlenNeighbouringSequences, ::testing::ValuesIn(neighbouring_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VarlenNeighbouringSequences);

// ---------------------------------------------------------------- VarlenManySequences

// Many sequences: the Hopper kernel ranks up to a few hundred sequences by
// cost and walks only the tiles that exist (kSchedSeqs: 512 at head_dim 64,
// 384 for hd128's 128x128 tile, 224 for hd256's 128x64 and the runners-up
// whose O buffer or K/V blocks fill shared memory); past that it walks the
// padded (batch, longest) numbering. 200
// sequences take the ranked walk at every head dim, 600 the padded one at
// every head dim, each once with and once without a causal mask. Lengths
// are random in [0, 300] (zeros and many ties in cost), keys independent of
// the queries; drawn when the test runs, from the row's seed.
std::vector<FeatureRow> many_sequences_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (int64_t batch : {200, 600}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 2, 1, seed++);
      cfg.seqlens_q = repeat(0, static_cast<size_t>(batch));  // lengths drawn in the test
      cfg.seqlens_k = repeat(0, static_cast<size_t>(batch));
      cfg.causal = (batch == 200) == (hd == 128);
      cfg.varlen_q = true;
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 130;
      cfg.with_lse = variant % 3 != 0;
      t.add("batch" + std::to_string(batch), cfg, {{Backend::kAuto, 0, false}});
    }
  }
  return t.rows();
}

class VarlenManySequences : public FeatureTest {};
TEST_P(VarlenManySequences, MatchesReference) {
  FeatureConfig cfg = row_config();
  std::mt19937_64 rng(cfg.seed);
  std::uniform_int_distribution<int64_t> length(0, 300);
  for (size_t b = 0; b < cfg.seqlens_q.size(); ++b) {
    cfg.seqlens_q[b] = length(rng);
    cfg.seqlens_k[b] = length(rng);
  }
  {
    // The premise: the Hopper kernel runs these where the device has it.
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    CaseConfig hopper;
    hopper.head_dim = cfg.head_dim;
    const std::vector<Backend> backends = backends_for(hopper);
    if (std::find(backends.begin(), backends.end(), Backend::kSm90) != backends.end()) {
      AttentionParams p = c.params();
      p.backend = Backend::kSm90;
      EXPECT_TRUE(sm90_runs(p)) << "the premise: the Hopper kernel runs this batch";
    }
  }
  check_case(cfg, GetParam().runs);
}
INSTANTIATE_TEST_SUITE_P(Features, VarlenManySequences, ::testing::ValuesIn(many_sequences_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VarlenManySequences);

// ---------------------------------------------------------------- VarlenWithoutTotals

// A varlen call without total_q / total_k (the fields left at 0, as callers
// written before they existed do) is still computed correctly by kAuto and
// kSm80, and kSm90 refuses it (kUnsupported, nothing written). The same
// call with the totals given runs on kSm90 where the device has it, and
// kAuto picks the Hopper kernel for it there (seqlen_q > 16).
std::vector<FeatureRow> without_totals_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool causal : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kFloat16 : DType::kBFloat16, hd, 8, 2, seed++);
      cfg.causal = causal;
      cfg.varlen_q = true;
      cfg.seqlens_q = tile_rotated(variant);
      cfg.seqlens_k = tile_rotated(variant + 4);
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 16;
      t.add("packed", cfg);
    }
  }
  return t.rows();
}

class VarlenWithoutTotals : public FeatureTest {};
TEST_P(VarlenWithoutTotals, RightOnSm80AndRefusedBySm90) {
  const FeatureConfig cfg = row_config();
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));
  ASSERT_GT(c.params().total_q, 0);
  ASSERT_GT(c.params().total_k, 0);

  // Without the totals (both, then each alone missing).
  for (auto [keep_q, keep_k] : {std::pair<bool, bool>{false, false}, {true, false}, {false, true}}) {
    SCOPED_TRACE(std::string(keep_q ? "total_q given" : "total_q 0") + ", " +
                 (keep_k ? "total_k given" : "total_k 0"));
    AttentionParams p = c.params();
    if (!keep_q) p.total_q = 0;
    if (!keep_k) p.total_k = 0;
    for (Backend backend : {Backend::kAuto, Backend::kSm80}) {
      SCOPED_TRACE(backend_name(backend));
      p.backend = backend;
      expect_params_match(c, p, ref_o, ref_lse);
      if (HasFatalFailure()) return;
    }
    p.backend = Backend::kAuto;
    KernelChoice choice;
    const Status q = query_kernel_choice(p, &choice);
    ASSERT_TRUE(q.ok()) << q.message;
    EXPECT_NE(choice.backend, Backend::kSm90) << "kAuto picked " << choice.name << " without the totals";
    ASSERT_TRUE(uses_sm90_unsupported_feature(p));
    expect_sm90(c, p, ref_o, ref_lse);  // refused: kUnsupported, nothing written
    if (HasFatalFailure()) return;
  }

  // With them.
  expect_sm90(c, c.params(), ref_o, ref_lse);
  if (HasFatalFailure()) return;
  KernelChoice choice;
  const Status q = query_kernel_choice(c.params(), &choice);
  ASSERT_TRUE(q.ok()) << q.message;
  AttentionParams forced = c.params();
  forced.backend = Backend::kSm90;
  if (sm90_runs(forced)) {
    EXPECT_EQ(choice.backend, Backend::kSm90) << "kAuto picked " << choice.name
                                              << " for a varlen prefill the Hopper kernel takes";
  }
}
INSTANTIATE_TEST_SUITE_P(Features, VarlenWithoutTotals, ::testing::ValuesIn(without_totals_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VarlenWithoutTotals);

// ---------------------------------------------------------------- EmptySequences

// Batches whose sequences are all empty: no query rows (nothing written;
// EmptySequencesNoQueryRows), or no keys (every row O = 0, LSE = -inf),
// for every KV layout.
int64_t empty_head_dim() { return head_dim_compiled(128) ? 128 : 64; }

std::vector<FeatureRow> no_keys_rows() {
  FeatureTable t;
  if (!head_dim_compiled(empty_head_dim())) return t.rows();
  uint64_t seed = kFeatureSeedBase + 1;  // after NoQueryRows' case
  for (KvLayout kv : {KvLayout::kDense, KvLayout::kVarlen, KvLayout::kPaged}) {
    for (bool causal : {false, true}) {
      FeatureConfig cfg = make_config(DType::kBFloat16, empty_head_dim(), 4, 2, seed++);
      cfg.causal = causal;
      cfg.varlen_q = kv == KvLayout::kVarlen;
      cfg.seqlens_q = repeat(kv == KvLayout::kPaged ? 3 : 70, 2);
      cfg.seqlens_k = {0, 0};
      cfg.kv = kv;
      cfg.use_seqused_k = kv != KvLayout::kVarlen;
      cfg.k_capacity = kv == KvLayout::kDense ? 64 : 0;
      t.add(std::string("no_keys_") + kv_layout_name(kv), cfg,
            {{Backend::kAuto}, {Backend::kSm80}, {Backend::kDecode}, {Backend::kDecode, 0, true}});
    }
  }
  return t.rows();
}

class EmptySequences : public FeatureTest {};
TEST_P(EmptySequences, NoKeys) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, EmptySequences, ::testing::ValuesIn(no_keys_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(EmptySequences);

class EmptySequencesNoQueryRows : public FeatureFixture {};
TEST_F(EmptySequencesNoQueryRows, WritesNothing) {
  const int64_t hd = empty_head_dim();
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kFloat16, hd, 4, 2, case_seed(kFeatureSeedBase));
  cfg.varlen_q = true;
  cfg.max_seqlen_q_slack = 16;  // seqlen_q 16: flash launches, but no sequence has a row
  cfg.seqlens_q = {0, 0, 0};
  cfg.seqlens_k = {5, 0, 100};
  cfg.kv = KvLayout::kVarlen;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  for (Backend backend : {Backend::kAuto, Backend::kSm80, Backend::kDecode}) {
    SCOPED_TRACE(backend_name(backend));
    const Status s = c.run(backend);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(c.outputs_untouched());
  }
  // total_q is 0 here, which reads as "not given": kSm90 may refuse
  // (kUnsupported); either way it writes nothing.
  SCOPED_TRACE("backend sm90");
  const Status s = c.run(Backend::kSm90);
  EXPECT_TRUE(s.ok() || s.code == StatusCode::kUnsupported) << s.message;
  EXPECT_TRUE(c.outputs_untouched());
}

}  // namespace
}  // namespace flash::test
