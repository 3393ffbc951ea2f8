// Which compiled configurations dispatch offers for a device, checked with
// made-up device capabilities (no GPU needed): configurations that need more
// shared memory than the device allows are never offered, fallback-only
// ones appear only when nothing before them fits, the heuristic's pick comes
// first, and a forced backend limits the list to its family.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/dispatch.h"

namespace flash {
namespace {

using detail::Candidate;
using detail::DeviceCaps;

DeviceCaps caps(int major, int minor, int max_smem_kib) {
  DeviceCaps c;
  c.major = major;
  c.minor = minor;
  c.num_sms = 100;
  c.max_smem = max_smem_kib * 1024;
  return c;
}

AttentionParams params(int64_t head_dim, bool causal, int64_t seqlen, Backend backend = Backend::kAuto) {
  AttentionParams p;
  p.head_dim = head_dim;
  p.causal = causal;
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = seqlen;
  p.heads_q = p.heads_kv = 8;
  p.backend = backend;
  return p;
}

std::vector<KernelChoice> offered(const AttentionParams& p, const DeviceCaps& c) {
  Candidate cands[8];
  const int n = detail::list_candidates(p, c, cands, 8);
  std::vector<KernelChoice> out;
  for (int i = 0; i < n; ++i) {
    KernelChoice k;
    EXPECT_TRUE(detail::describe(cands[i], p, &k));
    out.push_back(k);
  }
  return out;
}

bool compiled(int64_t head_dim) {
  switch (head_dim) {
#ifdef FLASH_TEST_HAS_HEAD_DIM_128
    case 128: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_256
    case 256: return true;
#endif
#ifdef FLASH_TEST_HAS_HEAD_DIM_64
    case 64: return true;
#endif
    default: return false;
  }
}

TEST(Dispatch, Hd256OnA100UsesTheConfigurationThatFits) {
  if (!compiled(256)) GTEST_SKIP() << "head_dim 256 not compiled";
  // A100: 163 KiB per block; the 128x64 tile needs 192 KiB.
  const std::vector<KernelChoice> a100 = offered(params(256, false, 4096), caps(8, 0, 163));
  ASSERT_EQ(a100.size(), 1u);
  EXPECT_EQ(a100[0].backend, Backend::kSm80);
  EXPECT_EQ(a100[0].block_m, 64);
  // sm_86/89: 99 KiB; no hd256 configuration fits, so nothing is offered.
  EXPECT_TRUE(offered(params(256, false, 4096), caps(8, 6, 99)).empty());
}

TEST(Dispatch, FallbackOnlyWhenNeeded) {
  if (!compiled(256)) GTEST_SKIP() << "head_dim 256 not compiled";
  const std::vector<KernelChoice> h100 = offered(params(256, false, 4096, Backend::kSm80), caps(9, 0, 227));
  ASSERT_EQ(h100.size(), 1u);
  EXPECT_EQ(h100[0].block_m, 128);
}

TEST(Dispatch, EveryOfferedConfigurationFits) {
  for (int64_t d : {64, 128, 256}) {
    if (!compiled(d)) continue;
    for (int kib : {99, 163, 227}) {
      for (const KernelChoice& k : offered(params(d, true, 2048), caps(kib == 227 ? 9 : 8, 0, kib))) {
        EXPECT_TRUE(k.backend == Backend::kSm90 || k.backend == Backend::kSm80) << k.name;
        if (k.backend == Backend::kSm90) {
          EXPECT_EQ(kib, 227) << k.name;
        }
      }
    }
  }
}

TEST(Dispatch, HeuristicFirstAndForcedBackends) {
  if (!compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  const DeviceCaps hopper = caps(9, 0, 227);
  std::vector<KernelChoice> list = offered(params(128, false, 16384), hopper);
  ASSERT_FALSE(list.empty());
#if FLASH_TEST_HAS_SM90
  EXPECT_EQ(list[0].backend, Backend::kSm90);
  EXPECT_EQ(list[0].block_n, 128);  // long non-causal: 128x128 (bench/NOTES.md, run 125)
  list = offered(params(128, false, 4096), hopper);
  EXPECT_EQ(list[0].block_n, 128);  // mid-length non-causal: 128x128 (bench/NOTES.md, run 125)
  list = offered(params(128, true, 16384), hopper);
  EXPECT_EQ(list[0].block_n, 128);  // causal at any length: 128x128 (bench/NOTES.md, run 114)
  list = offered(params(128, false, 1024), hopper);
  EXPECT_EQ(list[0].block_n, 128);  // short non-causal: 128x128 (bench/NOTES.md, v5)
#endif
  for (const KernelChoice& k : offered(params(128, false, 1024, Backend::kSm80), hopper)) {
    EXPECT_EQ(k.backend, Backend::kSm80) << k.name;
  }
  EXPECT_TRUE(offered(params(128, false, 1024, Backend::kSm90), caps(8, 0, 163)).empty());
}

// Softcap calls run the sm90 kernel's masked configurations (the softcap
// variant is compiled for those only), first candidate, with or without a
// mask: never an index only the non-causal list has.
TEST(Dispatch, SoftcapTakesTheMaskedConfigurations) {
#if FLASH_TEST_HAS_SM90
  const DeviceCaps hopper = caps(9, 0, 227);
  for (int64_t hd : {64, 128, 256}) {
    if (!compiled(hd)) continue;
    for (bool causal : {false, true}) {
      for (int64_t n : {1024, 2048, 16384}) {
        SCOPED_TRACE("head_dim " + std::to_string(hd) + (causal ? ", causal" : "") + ", N " + std::to_string(n));
        AttentionParams capped = params(hd, causal, n);
        capped.softcap = 30.f;
        Candidate first[8];
        const int count = detail::list_candidates(capped, hopper, first, 8);
        ASSERT_GT(count, 0);
        EXPECT_EQ(first[0].backend, Backend::kSm90);
        EXPECT_EQ(first[0].index, 0);
        // As many sm90 entries as a causal call gets, and the first is the
        // masked list's first configuration.
        const AttentionParams causal_call = params(hd, true, n);
        Candidate masked_list[8];
        const int masked_count = detail::list_candidates(causal_call, hopper, masked_list, 8);
        auto sm90_entries = [](const Candidate* c, int k) {
          int m = 0;
          for (int i = 0; i < k; ++i) m += c[i].backend == Backend::kSm90 ? 1 : 0;
          return m;
        };
        EXPECT_EQ(sm90_entries(first, count), sm90_entries(masked_list, masked_count));
        KernelChoice mine, masked;
        ASSERT_TRUE(detail::describe(first[0], capped, &mine));
        ASSERT_TRUE(detail::describe(Candidate{Backend::kSm90, 0}, causal_call, &masked));
        EXPECT_STREQ(mine.name, masked.name);
      }
    }
  }
#else
  GTEST_SKIP() << "built without the sm90 kernel";
#endif
}

// Windows on Hopper: the masked (causal-tuned) configurations, causal spelled
// as the window (-1, 0) exactly like causal, a window past any length
// (>= 2^30) like no window, and windows with a left edge on the masked
// tiles' first candidate.
TEST(Dispatch, WindowsTakeTheMaskedConfigurations) {
  const DeviceCaps hopper = caps(9, 0, 227);
  for (int64_t hd : {64, 128, 256}) {
    if (!compiled(hd)) continue;
    for (int64_t n : {1024, 2048, 16384}) {
      SCOPED_TRACE("head_dim " + std::to_string(hd) + ", N " + std::to_string(n));
      const std::vector<KernelChoice> causal = offered(params(hd, true, n), hopper);
      AttentionParams spelled = params(hd, false, n);
      spelled.window_right = 0;
      const std::vector<KernelChoice> as_window = offered(spelled, hopper);
      ASSERT_EQ(causal.size(), as_window.size());
      for (size_t i = 0; i < causal.size(); ++i) EXPECT_STREQ(causal[i].name, as_window[i].name);

      AttentionParams huge = params(hd, false, n);
      huge.window_left = huge.window_right = int64_t{1} << 31;
      const std::vector<KernelChoice> plain = offered(params(hd, false, n), hopper);
      const std::vector<KernelChoice> unbounded = offered(huge, hopper);
      ASSERT_EQ(plain.size(), unbounded.size());
      for (size_t i = 0; i < plain.size(); ++i) EXPECT_STREQ(plain[i].name, unbounded[i].name);

#if FLASH_TEST_HAS_SM90
      AttentionParams window = params(hd, true, n);
      window.window_left = 512;
      const std::vector<KernelChoice> windowed = offered(window, hopper);
      ASSERT_FALSE(windowed.empty());
      EXPECT_EQ(windowed[0].backend, Backend::kSm90);
      Candidate first[8];
      ASSERT_GT(detail::list_candidates(window, hopper, first, 8), 0);
      EXPECT_EQ(first[0].index, 0) << "windows take the masked configurations' first candidate";
#endif
    }
  }
}

// The decode split count on a dense cache gives about one CTA per SM
// (bench/NOTES.md, runs 45-46): 0.9 x num_sms CTAs, counted as (batch, K/V
// head, row block) x splits, no split once the batch alone reaches that; at
// most half the K/V blocks. A paged cache fills every CTA slot instead.
TEST(Dispatch, DecodeSplitsAboutOneCtaPerSm) {
  DeviceCaps h200 = caps(9, 0, 227);
  h200.num_sms = 132;  // target: 119 CTAs
  h200.smem_per_sm = 228 * 1024;
  for (int64_t hd : {64, 128, 256}) {
    AttentionParams p = params(hd, false, 1);
    p.heads_q = 32;
    p.heads_kv = 8;  // 4 query heads per K/V head: one row block
    p.seqlen_k = 32768;
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 15) << hd;  // 8 CTAs x 15 = 120
    p.batch = 8;
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 2) << hd;  // 64 x 2 = 128
    p.batch = 15;
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 1) << hd;  // 120 CTAs
    p.batch = 1;
    p.seqlen_k = 256;  // 4 K/V blocks of 64: at most 2 splits
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 2) << hd;
    p.seqlen_k = 100;
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 1) << hd;
    p.num_splits = 7;  // asked for: taken as is
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 7) << hd;
    p.num_splits = 0;
    p.seqlen_k = 32768;
    AttentionParams paged = p;
    int32_t table = 0;
    paged.block_table = &table;  // only compared with nullptr here
    paged.page_size = 256;
    paged.max_pages_per_seq = 128;
    EXPECT_GT(detail::decode_splits_wanted(paged, h200), detail::decode_splits_wanted(p, h200)) << hd;
    // batch 0 (query_kernel_choice plans it): no split, no division by zero CTAs.
    p.batch = 0;
    paged.batch = 0;
    EXPECT_EQ(detail::decode_splits_wanted(p, h200), 1) << hd;
    EXPECT_EQ(detail::decode_splits_wanted(paged, h200), 1) << hd;
  }
}

}  // namespace
}  // namespace flash
