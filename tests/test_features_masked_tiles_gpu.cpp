// The Hopper kernel's masked tile walks against the per-sequence reference:
// blocks shifted up by the last block's padding, more units than SMs with
// the middle blocks last, and the lazy softmax max's late rescale. Every
// row also runs on the other backends (feature_test.h).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "feature_test.h"
#include "kernels/sm90/unit_map.h"

namespace flash::test {
namespace {

// ---------------------------------------------------------------- ShiftedMaskedBlocks

// Masked calls shift their blocks up by the last block's padding (whole
// 64-row slices; 192-row tiles always, 128-row tiles from 16 query blocks
// on), so block 0 starts at a negative row (kernels/sm90/tile_scheduler.cuh,
// first_row): its padding warpgroups must neither load nor store, nor write
// LSE. Lengths that give 16+ blocks with padding at 192- and 128-row tiles
// (3100 rows: a 128-row shift at 192-row tiles, 64 rows at 128-row tiles;
// the varlen 2100 shifts 64 rows at 128-row tiles), dense (TMA stores,
// padded layout) and varlen (guarded stores; a short sequence first, so
// shifted padding rows fall in its rows or before the packed tensor),
// causal and with a window, with LSE. ShiftedMaskedBlocksShort covers the
// 64-row shift at 192-row tiles and softcap; VarlenManySequences' causal
// hd64 batch of 600 the shift on the padded walk.
std::vector<FeatureRow> shifted_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  const std::vector<int64_t> lengths_q = {100, 3100, 2100};
  const std::vector<int64_t> lengths_k = {150, 3100, 2300};
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool varlen : {false, true}) {
      for (bool window : {false, true}) {
        ++variant;
        FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 4, 2, seed++);
        cfg.causal = !window;
        if (window) {
          cfg.window_left = 700;
          cfg.window_right = 0;
        }
        cfg.with_lse = true;
        if (varlen) {
          cfg.varlen_q = true;
          cfg.seqlens_q = lengths_q;
          cfg.seqlens_k = lengths_k;
          cfg.kv = KvLayout::kVarlen;
          cfg.tail_rows = 70;
        } else {
          cfg.seqlens_q = {3100, 3100};
          cfg.seqlens_k = {3100, 3100};
          cfg.padded = true;
        }
        t.add(varlen ? "varlen" : "dense", cfg);
      }
    }
  }
  return t.rows();
}

class ShiftedMaskedBlocks : public FeatureTest {};
TEST_P(ShiftedMaskedBlocks, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, ShiftedMaskedBlocks, ::testing::ValuesIn(shifted_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ShiftedMaskedBlocks);

// 192-row tiles shift at any block count: 2000 rows (11 blocks) shift by 64
// rows, 1000 (6 blocks) by 128. Head dim 64, dense and varlen, causal, a
// window, and a softcap on a causal mask, with LSE.
std::vector<FeatureRow> shifted_short_rows() {
  FeatureTable t;
  if (!head_dim_compiled(64)) return t.rows();
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (bool varlen : {false, true}) {
    for (int mode = 0; mode < 3; ++mode) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, 64, 4, 2, seed++);
      cfg.causal = mode != 1;
      if (mode == 1) {
        cfg.window_left = 300;
        cfg.window_right = 0;
      }
      if (mode == 2) cfg.softcap = 30.f;
      cfg.with_lse = true;
      if (varlen) {
        cfg.varlen_q = true;
        cfg.seqlens_q = {1000, 2000, 100};
        cfg.seqlens_k = {1100, 2000, 150};
        cfg.kv = KvLayout::kVarlen;
        cfg.tail_rows = 70;
        t.add("varlen", cfg);
      } else {
        cfg.seqlens_q = {2000, 2000};
        cfg.seqlens_k = {2000, 2000};
        cfg.padded = true;
        t.add("dense2000", cfg);
        cfg.seqlens_q = {1000, 1000};
        cfg.seqlens_k = {1000, 1000};
        t.add("dense1000", cfg);
      }
    }
  }
  return t.rows();
}

class ShiftedMaskedBlocksShort : public FeatureTest {};
TEST_P(ShiftedMaskedBlocksShort, MatchesReference) { check_row(); }
INSTANTIATE_TEST_SUITE_P(Features, ShiftedMaskedBlocksShort, ::testing::ValuesIn(shifted_short_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ShiftedMaskedBlocksShort);

// ---------------------------------------------------------------- ManyUnitsMiddleBlocksLast

// Masked calls with more units than SMs: the CTAs walk every head's pairs,
// then every head's lone middle block (kernels/sm90/unit_map.h). 11 query
// blocks a head at 192-row tiles (2000 rows at hd64), 1400 rows at 128-row
// tiles (hd128, hd256): a middle block a head. As many heads as 3/8 of the
// SMs (set when the test runs): about 2.3 units an SM, and the middles start
// partway through a round. Causal and with a window, dense, with LSE.
std::vector<FeatureRow> many_units_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool window : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 2, 2, seed++);
      cfg.causal = !window;
      if (window) {
        cfg.window_left = 500;
        cfg.window_right = 0;
      }
      cfg.with_lse = true;
      const int64_t rows = hd == 64 ? 2000 : 1400;
      cfg.seqlens_q = {rows};
      cfg.seqlens_k = {rows};
      t.add("dense" + std::to_string(rows), cfg);
    }
  }
  return t.rows();
}

class ManyUnitsMiddleBlocksLast : public FeatureTest {};
TEST_P(ManyUnitsMiddleBlocksLast, MatchesReference) {
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  FeatureConfig cfg = row_config();
  cfg.heads_q = std::max<int64_t>(2, (int64_t{sms} * 3 + 15) / 16 * 2);  // even, about 3/8 of the SMs
  check_case(cfg, GetParam().runs);
}
INSTANTIATE_TEST_SUITE_P(Features, ManyUnitsMiddleBlocksLast, ::testing::ValuesIn(many_units_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ManyUnitsMiddleBlocksLast);

// ---------------------------------------------------------------- LazyMaxRescalesLate

// The lazy softmax max (kernels/sm90/kernel_traits.cuh, kLazyMax): every
// head_dim 128 and 256 Hopper kernel keeps a stale max until some row of the
// warp outgrows it by 2^8 (OnlineSoftmax::update<true>), then rescales O.
// Inputs in [-8, 8) spread the scores so that most rows' max grows by far
// more than that after the first block visited: the late-rescale path runs
// for most rows. Unmasked and causal, short and long rows; one row sees
// 131072 keys (1024 blocks), where a correction of the stale max other than
// exactly 1 would drift the softmax sum against O block after block. Where the device
// has the Hopper kernel for the head dim, kAuto must pick one of its
// configurations (any tile: each keeps the lazy max), and both kAuto and
// kSm90 must match the reference.
std::vector<FeatureRow> lazy_max_rows() {
  struct Shape {
    int64_t head_dim;
    bool causal;
    int64_t len_q, len_k;
  };
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase;
  int variant = 0;
  for (const Shape& k : {Shape{128, false, 300, 8300}, Shape{128, true, 16400, 16400}, Shape{128, false, 300, 2100},
                         Shape{128, true, 2100, 2100}, Shape{256, false, 300, 2100}, Shape{256, true, 2100, 2100},
                         Shape{128, false, 64, 131072}}) {
    if (!head_dim_compiled(k.head_dim)) continue;
    ++variant;
    FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, k.head_dim, 2, 1, seed++);
    cfg.causal = k.causal;
    cfg.input_scale = 8.f;
    cfg.with_lse = true;
    const size_t seqs = k.causal ? 1 : 2;
    cfg.seqlens_q.assign(seqs, k.len_q);
    cfg.seqlens_k.assign(seqs, k.len_k);
    t.add("q" + std::to_string(k.len_q) + "_k" + std::to_string(k.len_k), cfg);
  }
  return t.rows();
}

class LazyMaxRescalesLate : public FeatureTest {};
TEST_P(LazyMaxRescalesLate, MatchesReference) {
  check_case(row_config(), GetParam().runs,
             [](FeatureCase& c, const std::vector<double>&, const std::vector<double>&) {
               AttentionParams p = c.params();
               p.backend = Backend::kSm90;
               if (!sm90_runs(p)) return;  // no Hopper kernel here for this head dim
               KernelChoice choice;
               const Status s = query_kernel_choice(c.params(), &choice);
               ASSERT_TRUE(s.ok()) << s.message;
               EXPECT_EQ(choice.backend, Backend::kSm90) << "kAuto picked " << choice.name
                                                         << ": the lazy max would go untested on the auto path";
               EXPECT_GT(choice.block_m, 0) << choice.name;
               EXPECT_GT(choice.block_n, 0) << choice.name;
               EXPECT_EQ(std::string(choice.name).rfind("sm90 ", 0), 0u) << choice.name;
             });
}
INSTANTIATE_TEST_SUITE_P(Features, LazyMaxRescalesLate, ::testing::ValuesIn(lazy_max_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LazyMaxRescalesLate);

// ---------------------------------------------------------------- HiddenTopBlocks

// In the kernels of 192-row tiles (Mainloop::kPassHidden) a consumer
// warpgroup passes over the blocks none of its 64 rows sees, taking only
// their pingpong turns and releasing their stages: every block of a
// warpgroup of padding rows (a shifted block 0's, or past len_q in an
// unmasked last tile), and under a causal or right-window mask the top
// blocks past its last row's limit. Head dims 64 and 96, dense: causal
// 512 (block 0 of padding plus hidden top blocks), unmasked 1000 (two
// padding warpgroups in the last tile), causal with 64 and 200 more keys
// than queries, a right window of 50 keys, each also with three splits on
// the Hopper kernel (a split may leave a warpgroup nothing); with an LSE,
// and causal 512 without one (the default kernels, no LSE sums) and with
// ALiBi (its column term on the tensor cores without an LSE, the
// score-modifier kernel with one). Varlen causal (short sequences first,
// packed K/V). Head dim 64 only (hd96's cache calls run 128-row tiles):
// paged caches with seqused_k of 64-key pages (loaded in boxes) and 3-key
// pages (gathered, on the 192 x 96 gather kernel).
std::vector<FeatureRow> hidden_top_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 950;
  struct Shape {
    const char* name;
    int64_t len_q, len_k;
    bool causal;
    int64_t window_right;  // -1: none
    int64_t page_size;     // 0: a dense cache
    bool lse, alibi, varlen;
  };
  int variant = 0;
  for (int64_t hd : {64, 96}) {
    if (!head_dim_compiled(hd)) continue;
    for (const Shape& k :
         {Shape{"causal512", 512, 512, true, -1, 0, true, false, false},
          Shape{"noncausal1000", 1000, 1000, false, -1, 0, true, false, false},
          Shape{"causal_d64", 700, 764, true, -1, 0, true, false, false},
          Shape{"causal_d200", 700, 900, true, -1, 0, true, false, false},
          Shape{"right50", 600, 600, false, 50, 0, true, false, false},
          Shape{"causal512_nolse", 512, 512, true, -1, 0, false, false, false},
          Shape{"causal512_alibi_nolse", 512, 512, true, -1, 0, false, true, false},
          Shape{"causal512_alibi", 512, 512, true, -1, 0, true, true, false},
          Shape{"varlen_causal", 0, 0, true, -1, 0, true, false, true},
          Shape{"paged64_d64", 300, 364, true, -1, 64, true, false, false},
          Shape{"paged3_d200", 450, 650, true, -1, 3, true, false, false}}) {
      if (k.page_size > 0 && hd != 64) continue;
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 4, 2, seed++);
      cfg.causal = k.causal;
      if (k.window_right >= 0) cfg.window_right = k.window_right;
      cfg.with_lse = k.lse;
      if (k.alibi) {
        for (int64_t h = 0; h < cfg.heads_q; ++h) {
          cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(cfg.heads_q)));
        }
      }
      if (k.varlen) {
        cfg.varlen_q = true;
        cfg.seqlens_q = {100, 300, 512, 1000};
        cfg.seqlens_k = {100, 364, 512, 1000};
        cfg.kv = KvLayout::kVarlen;
      } else {
        cfg.seqlens_q = {k.len_q, k.len_q};
        cfg.seqlens_k = {k.len_k, k.len_k};
      }
      std::vector<FlashRun> runs = all_backends();
      if (k.page_size > 0) {
        cfg.kv = KvLayout::kPaged;
        cfg.page_size = k.page_size;
        cfg.use_seqused_k = true;
      } else if (!k.varlen && !k.alibi) {
        runs.push_back(FlashRun{Backend::kSm90, 3, true});
      }
      t.add(k.name, cfg, runs);
    }
  }
  return t.rows();
}

class HiddenTopBlocks : public FeatureTest {};
TEST_P(HiddenTopBlocks, MatchesReference) {
  // The split run asks for the Hopper kernel.
  check_row_without_absent_sm90();
}
INSTANTIATE_TEST_SUITE_P(Features, HiddenTopBlocks, ::testing::ValuesIn(hidden_top_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HiddenTopBlocks);

// ---------------------------------------------------------------- LongestFirstWalk

// Dense causal calls of 192-row tiles with at least 22 query blocks a head
// walk single tiles longest first in sections of heads, dealt snake-wise,
// each CTA reading its walk from a table in shared memory
// (kernels/sm90/unit_map.h, tile_scheduler.cuh). Head dim 64, 23 query
// blocks: 4300 rows as 64 (batch x head) indices in four sections of 16
// whose directions alternate, about 11 tiles a CTA on 132 SMs; with more
// keys than queries and GQA (one section of 64); with fewer keys than
// queries (rows at the top that see no key, so tiles without blocks on the
// walk) over 40 indices, sections of 16, 16 and 8; with and without the
// LSE. ALiBi calls without a softcap or a left window edge take the walk
// too: causal without an LSE (the kernel with ALiBi's column term on the
// tensor cores), causal with one, and not causal (its tiles cost alike;
// the walk only orders them). Head dim 96's 192 x 96 tile walks as well.
// Each row's shape is checked to take the walk by the launcher's rule.
std::vector<FeatureRow> longest_first_rows() {
  FeatureTable t;
  uint64_t seed = kFeatureSeedBase + 900;
  struct Shape {
    int64_t head_dim, len_q, len_k, heads_q, heads_kv;
    bool lse, alibi, causal;
  };
  int variant = 0;
  for (const Shape& k : {Shape{64, 4300, 4300, 32, 32, true, false, true}, Shape{64, 4300, 5000, 32, 8, false, false, true},
                         Shape{64, 4400, 4000, 20, 20, true, false, true}, Shape{64, 4300, 4300, 16, 4, false, true, true},
                         Shape{64, 4300, 5000, 16, 16, true, true, true}, Shape{64, 4300, 4300, 16, 4, false, true, false},
                         Shape{96, 4300, 4300, 16, 4, false, false, true}}) {
    ++variant;
    if (!head_dim_compiled(k.head_dim)) continue;
    FeatureConfig cfg =
        make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, k.head_dim, k.heads_q, k.heads_kv, seed++);
    cfg.causal = k.causal;
    cfg.with_lse = k.lse;
    cfg.seqlens_q = {k.len_q, k.len_q};
    cfg.seqlens_k = {k.len_k, k.len_k};
    if (k.alibi) {
      // Slopes 2^(-8 (h + 1) / heads_q), as ALiBi's paper sets them.
      for (int64_t h = 0; h < k.heads_q; ++h) {
        cfg.alibi.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(k.heads_q)));
      }
    }
    t.add("hd" + std::to_string(k.head_dim) + "_q" + std::to_string(k.len_q) + "_k" + std::to_string(k.len_k) + "_h" +
              std::to_string(k.heads_q) + "_" + std::to_string(k.heads_kv) + (k.alibi ? "_alibi" : "") +
              (k.causal ? "" : "_noncausal"),
          cfg);
  }
  return t.rows();
}

class LongestFirstWalk : public FeatureTest {};
TEST_P(LongestFirstWalk, MatchesReference) {
  const FeatureConfig cfg = row_config();
  const int64_t blocks = (cfg.seqlens_q[0] + 191) / 192;
  const long long kv_bytes = static_cast<long long>(cfg.seqlens_k[0]) * 2 * cfg.head_dim * 2;
  EXPECT_TRUE(cfg.causal || !cfg.alibi.empty()) << "only causal and ALiBi calls walk longest first";
  EXPECT_GT(sm90::longest_first_section(192, static_cast<int>(blocks),
                                        static_cast<int>(cfg.heads_q * static_cast<int64_t>(cfg.seqlens_q.size())),
                                        kv_bytes, static_cast<int>(cfg.heads_q / cfg.heads_kv)),
            0)
      << "the launcher's rule no longer walks this shape longest first";
  check_row();
}
INSTANTIATE_TEST_SUITE_P(Features, LongestFirstWalk, ::testing::ValuesIn(longest_first_rows()), RowName());
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(LongestFirstWalk);

}  // namespace
}  // namespace flash::test
