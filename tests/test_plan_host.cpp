// The plan (src/plan.h) for made-up devices, no GPU needed: which kernel
// family runs a call, that a forced backend stays in its family or says
// why not, that shared-memory limits are respected, how split-KV is sized
// and that flash's own split choice never fails for want of workspace.
// The heuristic's tile picks are not pinned here: only that the pick is a
// compiled configuration of the right family.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "build_config.h"
#include "kernels/decode/api.h"
#include "kernels/sm80/api.h"
#include "kernels/sm90/api.h"
#include "kernels/sm90/tma_limits.h"
#include "src/dispatch.h"
#include "src/plan.h"

namespace flash {
namespace {

using detail::Candidate;
using detail::DeviceCaps;
using detail::MaskVariant;
using detail::Plan;

DeviceCaps device(int major, int max_smem_kib, int num_sms = 132) {
  DeviceCaps c;
  c.major = major;
  c.minor = 0;
  c.num_sms = num_sms;
  c.max_smem = max_smem_kib * 1024;
  c.smem_per_sm = (max_smem_kib + 1) * 1024;
  return c;
}
const DeviceCaps kH200 = device(9, 227);
const DeviceCaps kA100 = device(8, 163, 108);
const DeviceCaps kL40 = device(8, 99, 142);

// Addresses are only compared and checked for alignment: nothing is dereferenced.
// Each fake tensor lives 2^44 bytes from the next, so no two overlap.
const void* fake(int slot) { return reinterpret_cast<const void*>(static_cast<uintptr_t>(slot + 1) << 44); }

AttentionParams dense(int64_t head_dim, int64_t seqlen_q, int64_t seqlen_k, bool causal = false) {
  AttentionParams p;
  p.q = fake(0);
  p.k = fake(1);
  p.v = fake(2);
  p.o = const_cast<void*>(fake(3));
  p.head_dim = head_dim;
  p.causal = causal;
  p.batch = 2;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = 32;
  p.heads_kv = 8;
  p.set_contiguous_bnhd();
  return p;
}

// Turns a dense call into one on a paged cache of `page_size`-key pages
// (seqused_k given, every sequence's pages in the table).
void make_paged(AttentionParams& p, int64_t page_size) {
  p.max_pages_per_seq = (p.seqlen_k + page_size - 1) / page_size;
  p.num_pages = p.batch * p.max_pages_per_seq;
  p.page_size = page_size;
  p.block_table = static_cast<const int32_t*>(fake(6));
  p.block_table_batch_stride = p.max_pages_per_seq;
  p.seqused_k = static_cast<const int32_t*>(fake(5));
  p.k_batch_stride = p.v_batch_stride = page_size * p.k_seq_stride;
}

using test::head_dim_compiled;
constexpr bool kHasSm90 = FLASH_TEST_HAS_SM90 != 0;

// 2^18 64-row query blocks x 64 heads, `splits` splits asked of the Hopper
// kernel, with a workspace that holds them.
void forced_sm90_split_units(AttentionParams& p, int32_t splits) {
  p.batch = 1;
  p.seqlen_q = int64_t{1} << 24;
  p.heads_q = 64;
  p.set_contiguous_bnhd();
  p.num_splits = splits;
  p.workspace = const_cast<void*>(fake(7));
  p.workspace_bytes = size_t{1} << 50;
  p.backend = Backend::kSm90;
}

// What a case expects of the plan.
enum class Expect { kSm90, kSm80, kDecode, kUnsupported };

struct PlanCase {
  const char* name;
  int64_t head_dim;
  DeviceCaps caps;
  std::function<void(AttentionParams&)> edit;
  Expect expect;
  const char* message = nullptr;  // a substring of the kUnsupported message
};

std::string case_name(const testing::TestParamInfo<PlanCase>& info) { return info.param.name; }

class PlanTable : public testing::TestWithParam<PlanCase> {};

TEST_P(PlanTable, PicksTheFamilyAndOnlyCompiledConfigurations) {
  const PlanCase& c = GetParam();
  if (!head_dim_compiled(c.head_dim)) GTEST_SKIP() << "head_dim " << c.head_dim << " not compiled";
  AttentionParams p = dense(c.head_dim, 2048, 2048);
  c.edit(p);
  ASSERT_TRUE(validate(p).ok()) << validate(p).message;
  Expect expect = c.expect;
  bool sm90_kernel = false;  // a compiled Hopper head dim (96 or a multiple of 64) at least c.head_dim
  for (int64_t d : {64, 96, 128, 192, 256}) sm90_kernel = sm90_kernel || (d >= c.head_dim && head_dim_compiled(d));
  if (expect == Expect::kSm90 && (!kHasSm90 || !sm90_kernel)) {
    expect = p.backend == Backend::kSm90 ? Expect::kUnsupported : Expect::kSm80;
  }
  Plan plan;
  const Status s = detail::make_plan(p, c.caps, &plan);
  if (expect == Expect::kUnsupported) {
    EXPECT_EQ(s.code, StatusCode::kUnsupported);
    EXPECT_NE(s.message[0], '\0');
    if (c.message != nullptr && c.expect == Expect::kUnsupported) {
      EXPECT_NE(std::strstr(s.message, c.message), nullptr) << s.message;
    }
    return;
  }
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_GT(plan.num_candidates, 0);
  const Backend first = expect == Expect::kSm90 ? Backend::kSm90 : expect == Expect::kSm80 ? Backend::kSm80
                                                                                           : Backend::kDecode;
  EXPECT_EQ(plan.candidates[0].backend, first);
  for (int i = 0; i < plan.num_candidates; ++i) {
    const Candidate& cand = plan.candidates[i];
    if (p.backend != Backend::kAuto) {
      EXPECT_EQ(cand.backend, p.backend);
    }
    KernelChoice k;
    ASSERT_TRUE(detail::describe(plan, cand, p, &k)) << i;
    EXPECT_EQ(k.backend, cand.backend);
    EXPECT_GT(k.block_m, 0);
    EXPECT_GT(k.block_n, 0);
    if (cand.backend == Backend::kSm90) {
      EXPECT_EQ(c.caps.major, 9);
    }
  }
  if (first != Backend::kDecode && p.num_splits == 0) {
    EXPECT_EQ(plan.num_splits, 1);  // no workspace given
  }
}

const PlanCase kPlanCases[] = {
    // Hopper takes the sm90 kernel for its head dims, dense or masked.
    {"H200Hd64Dense", 64, kH200, [](AttentionParams&) {}, Expect::kSm90},
    {"H200Hd128Causal", 128, kH200, [](AttentionParams& p) { p.causal = true; }, Expect::kSm90},
    {"H200Hd256Window", 256, kH200, [](AttentionParams& p) { p.window_left = 100; }, Expect::kSm90},
    {"H200Hd128Softcap", 128, kH200, [](AttentionParams& p) { p.softcap = 30.f; }, Expect::kSm90},
    // Head dims without a Hopper kernel of their own run on the next one.
    {"H200Hd96Sm90", 96, kH200, [](AttentionParams&) {}, Expect::kSm90},
    {"H200Hd32Sm90", 32, kH200, [](AttentionParams&) {}, Expect::kSm90},
    // Ampere: never the sm90 kernel; hd256 on the A100's 64 x 64 tile, on
    // 99 KiB devices the 64 x 32 one.
    {"A100Hd128", 128, kA100, [](AttentionParams&) {}, Expect::kSm80},
    {"A100Hd256", 256, kA100, [](AttentionParams&) {}, Expect::kSm80},
    {"L40Hd256FallbackTile", 256, kL40, [](AttentionParams&) {}, Expect::kSm80},
    {"A100ForcedSm90", 128, kA100, [](AttentionParams& p) { p.backend = Backend::kSm90; }, Expect::kUnsupported,
     "sm_90"},
    // Short queries: the decode kernel; forced backends stay in their family.
    {"DecodeOneQuery", 128, kH200, [](AttentionParams& p) { p.seqlen_q = 1; }, Expect::kDecode},
    {"Decode16Queries", 64, kH200, [](AttentionParams& p) { p.seqlen_q = 16; }, Expect::kDecode},
    {"ForcedSm80ShortQuery", 128, kH200,
     [](AttentionParams& p) {
       p.seqlen_q = 1;
       p.backend = Backend::kSm80;
       p.set_contiguous_bnhd();
     },
     Expect::kSm80},
    {"DecodeNoQueriesWithWorkspace", 128, kH200,
     [](AttentionParams& p) {
       p.seqlen_q = 0;
       p.seqlen_k = 65536;
       p.set_contiguous_bnhd();
       p.workspace = const_cast<void*>(fake(4));
       p.workspace_bytes = 1024;
     },
     Expect::kDecode},
    {"ForcedDecodeLongQuery", 128, kH200, [](AttentionParams& p) { p.backend = Backend::kDecode; }, Expect::kDecode},
    {"ForcedSm80Split", 128, kH200,
     [](AttentionParams& p) {
       p.backend = Backend::kSm80;
       p.num_splits = 4;
       p.workspace = const_cast<void*>(fake(4));
       p.workspace_bytes = size_t{1} << 30;
     },
     Expect::kSm80},
    // KV caches: seqused_k and pages of any size run on the Hopper kernel,
    // unsplit (pages of a multiple of 8 keys in TMA boxes, others gathered);
    // split requests go to sm80, or are refused when forced.
    {"SequsedKSm90", 128, kH200, [](AttentionParams& p) { p.seqused_k = static_cast<const int32_t*>(fake(5)); },
     Expect::kSm90},
    {"ForcedSm90SequsedK", 128, kH200,
     [](AttentionParams& p) {
       p.seqused_k = static_cast<const int32_t*>(fake(5));
       p.backend = Backend::kSm90;
     },
     Expect::kSm90},
    {"Paged16Sm90", 64, kH200, [](AttentionParams& p) { make_paged(p, 16); }, Expect::kSm90},
    {"Paged256CausalSm90", 256, kH200,
     [](AttentionParams& p) {
       make_paged(p, 256);
       p.causal = true;
     },
     Expect::kSm90},
    {"Paged12Sm90", 128, kH200, [](AttentionParams& p) { make_paged(p, 12); }, Expect::kSm90},
    {"Paged1Sm90", 128, kH200, [](AttentionParams& p) { make_paged(p, 1); }, Expect::kSm90},
    {"Paged3CausalSm90", 256, kH200,
     [](AttentionParams& p) {
       make_paged(p, 3);
       p.causal = true;
     },
     Expect::kSm90},
    {"ForcedSm90Paged12", 128, kH200,
     [](AttentionParams& p) {
       make_paged(p, 12);
       p.backend = Backend::kSm90;
     },
     Expect::kSm90},
    {"SequsedKSplitSm80", 128, kH200,
     [](AttentionParams& p) {
       p.seqused_k = static_cast<const int32_t*>(fake(5));
       p.num_splits = 2;
       p.workspace = const_cast<void*>(fake(4));
       p.workspace_bytes = size_t{1} << 30;
     },
     Expect::kSm80},
    {"ForcedSm90PagedSplit", 128, kH200,
     [](AttentionParams& p) {
       make_paged(p, 64);
       p.num_splits = 2;
       p.workspace = const_cast<void*>(fake(4));
       p.workspace_bytes = size_t{1} << 30;
       p.backend = Backend::kSm90;
     },
     Expect::kUnsupported, "does not split"},
    // TMA: a broadcast K goes to sm80 (forced sm90: says so); an unused
    // stride of a size-1 dimension does not matter.
    {"BroadcastKSm80", 128, kH200, [](AttentionParams& p) { p.k_batch_stride = 0; }, Expect::kSm80},
    {"ForcedSm90BroadcastK", 128, kH200,
     [](AttentionParams& p) {
       p.k_batch_stride = 0;
       p.backend = Backend::kSm90;
     },
     Expect::kUnsupported, "broadcast"},
    {"HugeStrideOfSizeOneBatch", 128, kH200,
     [](AttentionParams& p) {
       p.batch = 1;
       p.q_batch_stride = int64_t{1} << 40;
       p.backend = Backend::kSm90;
     },
     Expect::kSm90},
    {"ForcedSm90StrideOver2To40Bytes", 128, kH200,
     [](AttentionParams& p) {
       p.q_batch_stride = int64_t{1} << 40;
       p.backend = Backend::kSm90;
     },
     Expect::kUnsupported, "2^40"},
    // Empty work launches nothing: a forced backend still accepts it.
    {"ForcedSm90EmptyBatch", 128, kH200,
     [](AttentionParams& p) {
       p.batch = 0;
       p.backend = Backend::kSm90;
     },
     Expect::kSm90},
    // TMA's row coordinates are 32-bit: packed rows past 2^31 - 512 go to sm80.
    {"VarlenTotalPastTmaRowsSm80", 128, kH200,
     [](AttentionParams& p) {
       p.cu_seqlens_q = static_cast<const int32_t*>(fake(6));
       p.total_q = (int64_t{1} << 31) - 256;
     },
     Expect::kSm80},
    {"ForcedSm90TotalPastTmaRows", 128, kH200,
     [](AttentionParams& p) {
       p.cu_seqlens_q = static_cast<const int32_t*>(fake(6));
       p.total_q = (int64_t{1} << 31) - 256;
       p.backend = Backend::kSm90;
     },
     Expect::kUnsupported, "2^31"},
    // The persistent scheduler's (64-row block, head, batch, split) units are
    // int: a split count the caller asks for past that is refused up front,
    // not by the launch (2^18 blocks x 64 heads x 128 splits = 2^31 units).
    {"ForcedSm90SplitUnitsPastInt", 64, kH200, [](AttentionParams& p) { forced_sm90_split_units(p, 128); },
     Expect::kUnsupported, "units in int"},
    // One split fewer than that limit in 64-row units fits (2^31 - 2^24).
    {"ForcedSm90SplitUnitsBelowInt", 64, kH200, [](AttentionParams& p) { forced_sm90_split_units(p, 127); },
     Expect::kSm90},
    // A driver without the tensor-map encoder: no Hopper kernel, decided up front.
    {"NoTmaEncoderSm80", 128,
     [] {
       DeviceCaps c = kH200;
       c.tma_encoder = false;
       return c;
     }(),
     [](AttentionParams&) {}, Expect::kSm80},
    {"VarlenWithoutTotalsSm80", 128, kH200,
     [](AttentionParams& p) { p.cu_seqlens_q = static_cast<const int32_t*>(fake(6)); }, Expect::kSm80},
};
INSTANTIATE_TEST_SUITE_P(Plan, PlanTable, testing::ValuesIn(kPlanCases), case_name);

// Every configuration the plan offers is one the device has shared memory
// for (the sm90 kernel only on sm_90), and a head dim that fits nowhere is
// refused as unsupported, naming the shared memory.
TEST(Plan, OffersOnlyConfigurationsThatFit) {
  for (int64_t d : {32, 64, 96, 128, 192, 256}) {
    if (!head_dim_compiled(d)) continue;
    for (const DeviceCaps& caps : {kH200, kA100, kL40}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + ", sm_" + std::to_string(caps.major) + ", " +
                   std::to_string(caps.max_smem) + " bytes");
      int fits = 0;  // sm80 configurations of d within the device's shared memory
      for (int i = 0; i < sm80::num_candidates(d); ++i) fits += sm80::candidate_smem_bytes(d, i) <= caps.max_smem;
      Plan plan;
      const Status s = detail::make_plan(dense(d, 2048, 2048, true), caps, &plan);
      if (!s.ok()) {
        EXPECT_EQ(s.code, StatusCode::kUnsupported);
        EXPECT_NE(std::strstr(s.message, "shared memory"), nullptr) << s.message;
        EXPECT_EQ(fits, 0);
        continue;
      }
      for (int i = 0; i < plan.num_candidates; ++i) {
        const Candidate& c = plan.candidates[i];
        if (c.backend == Backend::kSm90) {
          EXPECT_EQ(caps.major, 9);
        }
        if (c.backend == Backend::kSm80) {
          EXPECT_LE(sm80::candidate_smem_bytes(d, c.index), caps.max_smem);
        }
      }
    }
  }
}

// Causal spelled as the window (-1, 0) is causal; a window past any length is none.
TEST(Plan, OneMaskDecision) {
  const AttentionParams causal = dense(128, 2048, 2048, true);
  AttentionParams spelled = dense(128, 2048, 2048);
  spelled.window_right = 0;
  AttentionParams huge = dense(128, 2048, 2048);
  huge.window_left = huge.window_right = INT64_MAX;
  AttentionParams capped = dense(128, 2048, 2048);
  capped.softcap = 30.f;
  AttentionParams left = dense(128, 2048, 2048, true);
  left.window_left = 256;
  const std::pair<const AttentionParams*, MaskVariant> cases[] = {{&causal, MaskVariant::kCausal},
                                                                  {&spelled, MaskVariant::kCausal},
                                                                  {&huge, MaskVariant::kTail},
                                                                  {&capped, MaskVariant::kScoreMod},
                                                                  {&left, MaskVariant::kWindow}};
  for (const auto& [p, mask] : cases) {
    ASSERT_TRUE(validate(*p).ok());
    Plan plan;
    if (!detail::make_plan(*p, kH200, &plan).ok()) continue;  // head_dim 128 pruned
    EXPECT_EQ(plan.mask, mask);
  }
}

// Score modifiers at head dim 64 under a left window of at most 256 keys
// run the 128-row tile (candidate 1) first, but for ALiBi with the right
// edge at the diagonal and without a softcap, an LSE or splits, whose
// column term candidate 0 puts on the tensor cores; unwindowed calls, wider
// windows, and head dim 128 keep candidate 0 first (head dim 96: the test
// below).
TEST(Plan, ShortWindowedScoreModsAtHeadDim64TakeThe128RowTile) {
  if (!kHasSm90 || !head_dim_compiled(64)) GTEST_SKIP() << "needs the Hopper kernel and head_dim 64";
  enum Mod { kPlain, kAlibi, kSoftcap, kBoth };
  struct Case {
    int64_t head_dim, window_left, window_right;  // window_right -1: causal
    Mod mod;
    bool lse;
    int splits;  // 0: flash's choice (none at this size)
    int first;
  };
  const Case cases[] = {
      {64, 128, -1, kAlibi, false, 0, 0}, {64, 256, -1, kAlibi, false, 0, 0},  {64, 0, -1, kAlibi, false, 0, 0},
      {64, 128, 0, kAlibi, false, 0, 0},  {64, 128, -1, kAlibi, true, 0, 1},   {64, 256, -1, kAlibi, true, 0, 1},
      {64, 0, -1, kAlibi, true, 0, 1},    {64, 128, 128, kAlibi, false, 0, 1}, {64, 128, -1, kSoftcap, false, 0, 1},
      {64, 128, -1, kBoth, false, 0, 1},  {64, 128, -1, kAlibi, false, 2, 1},  {64, 257, -1, kAlibi, true, 0, 0},
      {64, -1, -1, kAlibi, true, 0, 0},   {64, 128, -1, kPlain, false, 0, 0},  {128, 128, -1, kAlibi, true, 0, 0}};
  const float slopes = 0.f;
  for (const Case& c : cases) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim) + ", window (" + std::to_string(c.window_left) + ", " +
                 std::to_string(c.window_right) + "), mod " + std::to_string(c.mod) + (c.lse ? ", lse" : "") +
                 ", splits " + std::to_string(c.splits));
    if (!head_dim_compiled(c.head_dim)) continue;
    AttentionParams p = dense(c.head_dim, 4096, 4096, c.window_right < 0);
    p.window_left = c.window_left;
    if (c.window_right >= 0) p.window_right = c.window_right;
    if (c.mod == kAlibi || c.mod == kBoth) p.alibi_slopes = &slopes;  // never read by the plan
    if (c.mod == kSoftcap || c.mod == kBoth) p.softcap = 30.f;
    if (c.lse) p.lse = static_cast<float*>(const_cast<void*>(fake(4)));
    if (c.splits > 0) {
      p.num_splits = c.splits;
      p.workspace = const_cast<void*>(fake(5));
      p.workspace_bytes = size_t{1} << 30;
    }
    ASSERT_TRUE(validate(p).ok());
    Plan plan;
    ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    ASSERT_EQ(plan.num_splits, c.splits > 0 ? c.splits : 1);
    ASSERT_GE(plan.num_candidates, 2);
    EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
    EXPECT_EQ(plan.candidates[0].index, c.first);
    EXPECT_EQ(plan.candidates[1].index, 1 - c.first);
  }
}

// Head dim 96 (and 80, which runs on it) takes the 192 x 96 tile of three
// consumer warpgroups, with 128 x 128 as the runner-up; score-modifier
// calls (sm90::kScoreModCandidate96) and KV-cache calls
// (sm90::cache_candidate), gathered or in boxes, run 128 x 128 alone.
TEST(Plan, HeadDim96Takes192RowsButNotForScoreModsOrCaches) {
  if (!kHasSm90 || !head_dim_compiled(96)) GTEST_SKIP() << "needs the Hopper kernel and head_dim 96";
  const float slopes = 0.f;
  struct Case {
    const char* what;
    int64_t head_dim;
    std::function<void(AttentionParams&)> setup;
    const char* first;  // the first candidate's name
    int num_candidates;
  };
  const Case cases[] = {
      {"plain", 96, [](AttentionParams&) {}, "sm90 192x96 3wg 2st", 2},
      {"causal", 96, [](AttentionParams& p) { p.causal = true; }, "sm90 192x96 3wg 2st", 2},
      {"window", 96, [](AttentionParams& p) { p.window_left = 128; }, "sm90 192x96 3wg 2st", 2},
      {"head_dim 80", 80, [](AttentionParams&) {}, "sm90 192x96 3wg 2st", 2},
      {"alibi", 96, [&](AttentionParams& p) { p.alibi_slopes = &slopes; }, "sm90 128x128 2wg 2st", 1},
      {"softcap", 96, [](AttentionParams& p) { p.softcap = 30.f; }, "sm90 128x128 2wg 2st", 1},
      {"alibi, head_dim 80", 80, [&](AttentionParams& p) { p.alibi_slopes = &slopes; }, "sm90 128x128 2wg 2st", 1},
      {"seqused_k", 96, [](AttentionParams& p) { p.seqused_k = static_cast<const int32_t*>(fake(5)); },
       "sm90 128x128 2wg 2st", 1},
      {"16-key pages", 96, [](AttentionParams& p) { make_paged(p, 16); }, "sm90 128x128 2wg 2st", 1},
      {"1-key pages", 96, [](AttentionParams& p) { make_paged(p, 1); }, "sm90 128x128 2wg 2st gather", 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    AttentionParams p = dense(c.head_dim, 4096, 4096);
    c.setup(p);
    Plan plan;
    ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    int sm90_candidates = 0;
    for (int i = 0; i < plan.num_candidates; ++i) sm90_candidates += plan.candidates[i].backend == Backend::kSm90;
    ASSERT_EQ(sm90_candidates, c.num_candidates);
    ASSERT_EQ(plan.candidates[0].backend, Backend::kSm90);
    KernelChoice choice;
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
    EXPECT_STREQ(choice.name, c.first);
    if (c.num_candidates == 2) {
      ASSERT_EQ(plan.candidates[1].backend, Backend::kSm90);
      ASSERT_TRUE(detail::describe(plan, plan.candidates[1], p, &choice));
      EXPECT_STRNE(choice.name, c.first);
    }
  }
}

// A head dim between the compiled ones runs on the next compiled kernel of
// each path (the Hopper kernel's next of 64, 96, 128, 192, 256); one wider than every
// compiled head dim is refused as unsupported. A split call's workspace
// holds rows as wide as the widest kernel that may run it.
TEST(Plan, ValueHeadDimRunsAsTheWiderOfTheTwo) {
  // A call with head_dim_v of its own plans exactly as the call whose head
  // dim is the wider of head_dim and head_dim_v: the same kernels, the same
  // splits and split rows.
  auto same_plan = [](const AttentionParams& p, const AttentionParams& wide) -> ::testing::AssertionResult {
    Plan a, b;
    const Status sa = detail::make_plan(p, kH200, &a), sb = detail::make_plan(wide, kH200, &b);
    if (sa.code != sb.code) return ::testing::AssertionFailure() << sa.message << " vs " << sb.message;
    if (!sa.ok()) return ::testing::AssertionSuccess();
    if (a.num_candidates != b.num_candidates || a.num_splits != b.num_splits ||
        a.workspace_bytes != b.workspace_bytes || a.workspace_wanted != b.workspace_wanted) {
      return ::testing::AssertionFailure() << "plans differ";
    }
    for (int i = 0; i < a.num_candidates; ++i) {
      if (a.candidates[i].backend != b.candidates[i].backend || a.candidates[i].index != b.candidates[i].index) {
        return ::testing::AssertionFailure() << "candidate " << i << " differs";
      }
    }
    return ::testing::AssertionSuccess();
  };
  for (int64_t d = 8; d <= 256; d += 8) {
    for (int64_t dv = 8; dv <= 256; dv += 8) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + ", head_dim_v " + std::to_string(dv));
      AttentionParams p = dense(d, 2048, 2048, true);
      p.head_dim_v = dv;
      p.set_contiguous_bnhd();
      EXPECT_TRUE(same_plan(p, dense(std::max(d, dv), 2048, 2048, true)));
      for (Backend b : {Backend::kDecode, Backend::kSm80, Backend::kAuto}) {
        AttentionParams split = dense(d, 1, 32768);
        split.head_dim_v = dv;
        split.set_contiguous_bnhd();
        AttentionParams wide = dense(std::max(d, dv), 1, 32768);
        for (AttentionParams* x : {&split, &wide}) {
          x->backend = b;
          x->num_splits = 4;
          x->workspace = const_cast<void*>(fake(4));
          x->workspace_bytes = size_t{1} << 30;
        }
        EXPECT_TRUE(same_plan(split, wide)) << "backend " << static_cast<int>(b);
      }
    }
  }
}

// MLA's absorbed decode: one K/V head, Q K^T over 576 columns, V the
// first 512 columns of K's rows (v is k, with k's strides).
AttentionParams mla(int64_t batch, int64_t keys, int64_t heads) {
  AttentionParams p;
  p.q = fake(0);
  p.k = fake(1);
  p.v = p.k;
  p.o = const_cast<void*>(fake(3));
  p.head_dim = 576;
  p.head_dim_v = 512;
  p.batch = batch;
  p.seqlen_q = 1;
  p.seqlen_k = keys;
  p.heads_q = heads;
  p.heads_kv = 1;
  p.softmax_scale = 0.0722f;  // 1/sqrt(192)
  p.set_contiguous_bnhd();    // V gets K's strides at this shape
  return p;
}

TEST(Plan, MlaRunsOnTheMlaKernels) {
  const AttentionParams p = mla(64, 8192, 128);
  EXPECT_EQ(p.v_seq_stride, 576);
  EXPECT_EQ(p.v_batch_stride, p.k_batch_stride);
  AttentionParams bhnd = p;
  bhnd.set_contiguous_bhnd();
  EXPECT_EQ(bhnd.v_head_stride, 8192 * 576);
  EXPECT_EQ(bhnd.v_seq_stride, 576);
  ASSERT_TRUE(validate(p).ok()) << validate(p).message;
  EXPECT_EQ(detail::split_row_width(p), 576);
  Plan plan;
  KernelChoice choice;
  // Without the Hopper kernel (an sm80 GPU, or a build without sm_90a) and
  // with Backend::kDecode: the split-D decode kernel, 16-row CTAs.
  for (const DeviceCaps& caps : {kA100, kH200}) {
    AttentionParams q = p;
    if (caps.major == 9) q.backend = Backend::kDecode;
    Status s = detail::make_plan(q, caps, &plan);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(plan.num_candidates, 1);
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
    EXPECT_EQ(plan.num_splits, 1);  // 64 x 8 row blocks fill the GPU
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], q, &choice));
    EXPECT_STREQ(choice.name, "decode mla 16x32 4w 3st 1 split");
  }
  // A Hopper part with less shared memory than the Hopper kernel's:
  // Backend::kAuto takes the split-D kernel, kSm90 says why not.
  if (kHasSm90) {
    Status s = detail::make_plan(p, device(9, 200), &plan);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
    AttentionParams forced = p;
    forced.backend = Backend::kSm90;
    s = detail::make_plan(forced, device(9, 200), &plan);
    EXPECT_EQ(s.code, StatusCode::kUnsupported);
    EXPECT_NE(std::strstr(s.message, "bytes of shared memory"), nullptr) << s.message;
  }
  // 99 KiB of shared memory (sm_86/89): the split-D kernel's two-stage
  // variant (candidate 1, 98 KiB); below that, refused.
  for (Backend b : {Backend::kAuto, Backend::kDecode}) {
    AttentionParams q = mla(1, 32768, 16);
    q.backend = b;
    Status s = detail::make_plan(q, kL40, &plan);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(plan.num_candidates, 1);
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
    EXPECT_EQ(plan.candidates[0].index, 1);
    EXPECT_EQ(plan.splits_wanted, 128);  // one row block for 142 SMs: kMaxSplits
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], q, &choice));
    EXPECT_STREQ(choice.name, "decode mla 16x32 4w 2st 1 split");
  }
  Status s = detail::make_plan(p, device(8, 96), &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported);
  EXPECT_NE(std::strstr(s.message, "split-D decode kernel needs 100352 bytes"), nullptr) << s.message;
  AttentionParams forced = p;
  forced.backend = Backend::kSm90;
  s = detail::make_plan(forced, kA100, &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;

  s = detail::make_plan(p, kH200, &plan);
  if (!kHasSm90) {
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
    return;
  }
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(plan.num_candidates, 1);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.num_splits, 1);  // 64 x 2 row blocks: 128 CTAs, about one an SM
  ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
  EXPECT_STREQ(choice.name, "sm90 mla 64x64 2wg 2st");

  // One sequence of 32k keys: two row blocks, so splits, when the
  // workspace holds them (576 + 1 floats a row and split).
  AttentionParams one = mla(1, 32768, 128);
  s = detail::make_plan(one, kH200, &plan);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(plan.num_splits, 1);
  EXPECT_EQ(plan.splits_wanted, 60);
  EXPECT_EQ(plan.workspace_wanted, size_t{60} * 128 * 577 * 4);
  one.workspace = const_cast<void*>(fake(4));
  one.workspace_bytes = plan.workspace_wanted;
  s = detail::make_plan(one, kH200, &plan);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(plan.num_splits, 60);
}

TEST(Plan, MlaRowsFitAnInt) {
  AttentionParams p = mla(1, 1024, 128);
  p.seqlen_q = (int64_t{1} << 30) / 128 + 1;
  p.set_contiguous_bnhd();
  Plan plan;
  const Status s = detail::make_plan(p, kH200, &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported);
  EXPECT_NE(std::strstr(s.message, "2^30 query rows"), nullptr) << s.message;
}

TEST(Plan, MlaArgumentsAreChecked) {
  auto expect = [](const AttentionParams& p, StatusCode code, const char* text) {
    const Status s = validate(p);
    EXPECT_EQ(s.code, code) << s.message;
    EXPECT_NE(std::strstr(s.message, text), nullptr) << s.message;
  };
  AttentionParams p = mla(4, 1024, 16);
  p.v = fake(2);
  expect(p, StatusCode::kInvalidArgument, "v must be k");
  p = mla(4, 1024, 16);
  p.v_seq_stride = 512;
  expect(p, StatusCode::kInvalidArgument, "v must be k");
  p = mla(4, 1024, 16);
  p.backend = Backend::kSm80;
  expect(p, StatusCode::kUnsupported, "not on the sm80 kernel");
  p = mla(4, 1024, 16);
  p.kv_dtype = KvDType::kFloat8E4M3;
  expect(p, StatusCode::kUnsupported, "fp8 cache");
  p = mla(4, 1024, 16);
  p.kv_dtype = static_cast<KvDType>(7);
  expect(p, StatusCode::kInvalidArgument, "kv_dtype 7 is not valid");
  p = mla(4, 1024, 16);
  p.softmax_scale = 0.f;
  expect(p, StatusCode::kInvalidArgument, "needs softmax_scale");
  p = mla(4, 1024, 16);
  p.k_new = fake(7);
  p.v_new = fake(8);
  expect(p, StatusCode::kUnsupported, "append");
  // Only the (576, 512) pair is MLA's.
  p = mla(4, 1024, 16);
  p.head_dim_v = 0;
  expect(p, StatusCode::kInvalidArgument, "head_dim 576 is not supported");
  p = mla(4, 1024, 16);
  p.head_dim_v = 256;
  expect(p, StatusCode::kInvalidArgument, "head_dim 576 is not supported");
  p = mla(4, 1024, 16);
  p.head_dim = 512;
  p.head_dim_v = 256;
  expect(p, StatusCode::kInvalidArgument, "head_dim 512 is not supported");
}

TEST(Plan, HeadDim512RunsOnTheSplitDKernel) {
  AttentionParams p = dense(512, 1, 8192);
  ASSERT_TRUE(validate(p).ok()) << validate(p).message;
  EXPECT_EQ(detail::split_row_width(p), 512);
  Plan plan;
  KernelChoice choice;
  // 99 KiB of shared memory (sm_86/89): 16-key blocks (candidate 1, 84 KiB).
  for (const DeviceCaps& caps : {kH200, kA100, kL40}) {
    const bool small = caps.max_smem == kL40.max_smem;
    for (int64_t seqlen_q : {int64_t{1}, int64_t{2048}}) {
      p.seqlen_q = seqlen_q;
      p.set_contiguous_bnhd();
      const Status s = detail::make_plan(p, caps, &plan);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_EQ(plan.num_candidates, 1);
      EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
      EXPECT_EQ(plan.candidates[0].index, small ? 1 : 0);
      ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
      const char* name = small ? "decode hd512 16x16 4w 2st" : "decode hd512 16x32 4w 2st";
      EXPECT_EQ(std::string(choice.name).rfind(name, 0), 0u) << choice.name;
    }
  }
  // Splits count the variant's blocks, two at least a split: 256 keys are
  // 16 blocks of 16 keys on the L40 (8 splits for its 16 row blocks), 8 of
  // 32 on the A100 (4).
  for (const DeviceCaps& caps : {kL40, kA100}) {
    ASSERT_TRUE(detail::make_plan(dense(512, 1, 256), caps, &plan).ok());
    EXPECT_EQ(plan.splits_wanted, caps.max_smem == kL40.max_smem ? 8 : 4);
  }
  Status s = detail::make_plan(p, device(8, 64), &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported);
  EXPECT_NE(std::strstr(s.message, "needs 86016 bytes"), nullptr) << s.message;
  for (Backend b : {Backend::kSm80, Backend::kSm90}) {
    AttentionParams q = p;
    q.backend = b;
    s = validate(q);
    EXPECT_EQ(s.code, StatusCode::kUnsupported);
    EXPECT_NE(std::strstr(s.message, "split-D decode kernel"), nullptr) << s.message;
  }
  AttentionParams q = p;
  q.head_dim_v = 512;
  q.set_contiguous_bnhd();
  EXPECT_TRUE(validate(q).ok()) << validate(q).message;
  q.head_dim_v = 256;
  q.set_contiguous_bnhd();
  EXPECT_EQ(validate(q).code, StatusCode::kInvalidArgument);
  q = p;
  q.kv_dtype = KvDType::kFloat8E4M3;
  EXPECT_EQ(validate(q).code, StatusCode::kUnsupported);
}

TEST(Plan, Fp8CacheRunsOnTheDecodeKernelAtAMultipleOf64) {
  // An fp8 call runs on the smallest compiled multiple of 64 at least its
  // width: decode-length ones on the decode kernel, prefill-length ones on
  // the Hopper kernel where it is built (else the decode kernel); split
  // rows are at least that wide.
  for (int64_t d = 16; d <= 256; d += 16) {
    int64_t kernel = 0;
    for (int64_t c : {64, 128, 192, 256}) {
      if (kernel == 0 && c >= d && head_dim_compiled(c)) kernel = c;
    }
    for (int64_t seqlen_q : {1, 2048}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + ", seqlen_q " + std::to_string(seqlen_q));
      AttentionParams p = dense(d, seqlen_q, 32768, true);
      p.kv_dtype = KvDType::kFloat8E4M3;
      p.workspace = const_cast<void*>(fake(4));
      p.workspace_bytes = size_t{1} << 30;
      Plan plan;
      const Status s = detail::make_plan(p, kH200, &plan);
      if (kernel == 0) {
        EXPECT_EQ(s.code, StatusCode::kUnsupported);
        EXPECT_NE(std::string(s.message).find("FLASH_HEAD_DIMS"), std::string::npos) << s.message;
        continue;
      }
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_EQ(plan.num_candidates, 1);
      EXPECT_GE(detail::split_row_width(p), kernel);
      KernelChoice choice;
      ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
      if (kHasSm90 && seqlen_q > 16) {
        EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
        EXPECT_EQ(plan.num_splits, 1);
        EXPECT_NE(std::string(choice.name).find(" fp8"), std::string::npos) << choice.name;
        // Head dim 64: the 128-row, two-warpgroup tile (its producer has
        // the registers to widen); elsewhere the head dim's first tile.
        if (kernel == 64) {
          EXPECT_EQ(std::string(choice.name).rfind("sm90 128x128 2wg 3st", 0), 0u) << choice.name;
        }
        EXPECT_EQ(plan.candidates[0].index, kernel == 64 ? 1 : 0);
        continue;
      }
      EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
      EXPECT_NE(std::string(choice.name).find("decode fp8"), std::string::npos) << choice.name;
      EXPECT_EQ(choice.stages, decode::stages(kernel, true));
    }
  }
}

TEST(Plan, Fp8CacheBf16KeepsKInE4m3OnThreeStages) {
  // bf16 calls at head dim 256 read K as e4m3, half a block a stage, and
  // run three stages (FwdTraits::kCompactK); fp16 ones widen K and run the
  // candidate's two, as do both dtypes at head dim 128.
  if (!kHasSm90) GTEST_SKIP() << "no Hopper kernel in this build";
  if (!head_dim_compiled(128) && !head_dim_compiled(256)) GTEST_SKIP() << "head dims 128 and 256 not compiled";
  for (int64_t d : {128, 256}) {
    if (!head_dim_compiled(d)) continue;
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + (dtype == DType::kBFloat16 ? ", bf16" : ", fp16"));
      AttentionParams p = dense(d, 2048, 32768, true);
      p.dtype = dtype;
      p.kv_dtype = KvDType::kFloat8E4M3;
      Plan plan;
      const Status s = detail::make_plan(p, kH200, &plan);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_EQ(plan.candidates[0].backend, Backend::kSm90);
      KernelChoice choice;
      ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
      const int stages = dtype == DType::kBFloat16 && d == 256 ? sm90::kFp8CacheCompactStages : 2;
      EXPECT_EQ(choice.stages, stages);
      EXPECT_NE(std::string(choice.name).find(" " + std::to_string(stages) + "st fp8"), std::string::npos)
          << choice.name;
    }
  }
}

TEST(Plan, Fp8CacheOnHopperUnlessFlashSplits) {
  // Prefill on an fp8 cache runs the Hopper kernel unsplit, unless flash
  // would split the call (few query tiles, a workspace given): then the
  // decode kernel splits it. kSm90 takes any fp8 call it can, unsplit; a
  // split asked of it is refused.
  if (!kHasSm90 || !head_dim_compiled(128)) GTEST_SKIP() << "needs the Hopper kernel at head_dim 128";
  AttentionParams p = dense(128, 64, 32768, true);
  p.batch = 1;
  p.kv_dtype = KvDType::kFloat8E4M3;
  Plan plan;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90) << "no workspace: nothing splits";
  EXPECT_GT(plan.splits_wanted, 1) << "the workspace it would split with is reported";
  p.workspace = const_cast<void*>(fake(4));
  p.workspace_bytes = size_t{1} << 30;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
  EXPECT_GT(plan.num_splits, 1);
  p.backend = Backend::kSm90;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.num_splits, 1);
  p.num_splits = 2;
  const Status s = detail::make_plan(p, kH200, &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported);
  EXPECT_NE(std::string(s.message).find("does not split calls on an fp8 cache"), std::string::npos) << s.message;
  p.num_splits = 0;
  p.backend = Backend::kAuto;
  make_paged(p, 3);
  p.workspace = nullptr;
  p.workspace_bytes = 0;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90) << "any page size";
}

TEST(Plan, Fp8CacheWorkspaceItReportsIsTheSplitItRuns) {
  // The workspace an unsplit fp8-cache plan reports is the one with which
  // the call splits: given it, the plan runs split (on the decode kernel)
  // and wants the same bytes again; a plan wanting none stays as it was.
  if (!kHasSm90) GTEST_SKIP() << "needs the Hopper kernel";
  int rows = 0;
  for (int64_t d : {64, 128, 256}) {
    if (!head_dim_compiled(d)) continue;
    for (int64_t seqlen_q : {32, 128, 512, 2048}) {
      for (int64_t seqlen_k : {1024, 8192, 65536}) {
        for (int64_t batch : {1, 4}) {
          for (int64_t heads_kv : {8, 2}) {
            SCOPED_TRACE("hd " + std::to_string(d) + " q " + std::to_string(seqlen_q) + " k " +
                         std::to_string(seqlen_k) + " b " + std::to_string(batch) + " kv " + std::to_string(heads_kv));
            AttentionParams p = dense(d, seqlen_q, seqlen_k, true);
            p.batch = batch;
            p.heads_q = 8;
            p.heads_kv = heads_kv;
            p.kv_dtype = KvDType::kFloat8E4M3;
            p.set_contiguous_bnhd();
            Plan bare;
            ASSERT_TRUE(detail::make_plan(p, kH200, &bare).ok());
            const Backend before = bare.candidates[0].backend;
            p.workspace = const_cast<void*>(fake(4));
            p.workspace_bytes = bare.workspace_wanted;
            Plan given;
            ASSERT_TRUE(detail::make_plan(p, kH200, &given).ok());
            EXPECT_EQ(given.workspace_wanted, bare.workspace_wanted);
            if (bare.workspace_wanted == 0) {
              EXPECT_EQ(given.candidates[0].backend, before);
              continue;
            }
            ++rows;
            EXPECT_GT(given.num_splits, 1);
            EXPECT_EQ(given.workspace_bytes, bare.workspace_wanted);
          }
        }
      }
    }
  }
  if (head_dim_compiled(128)) {
    EXPECT_GT(rows, 0) << "no row wanted a workspace";
  }
}

TEST(Plan, Fp8CacheOnTheDecodeKernelKeepsItsGridLimits) {
  // Off the Hopper kernel an fp8-cache call runs on the decode kernel at any
  // seqlen_q, whose 32-bit rows hold at most 2^31 - 16 query rows a K/V
  // head: the plan refuses more, as validate does for Backend::kDecode.
  int64_t d = 0;
  for (int64_t c : {64, 128, 192, 256}) {
    if (d == 0 && head_dim_compiled(c)) d = c;
  }
  if (d == 0) GTEST_SKIP() << "no head dim of the fp8 decode kernel compiled";
  AttentionParams p = dense(d, 32768, 1024, false);
  p.batch = 1;
  p.heads_q = 65535;
  p.heads_kv = 1;
  p.kv_dtype = KvDType::kFloat8E4M3;
  p.set_contiguous_bnhd();
  Plan plan;
  ASSERT_TRUE(detail::make_plan(p, kA100, &plan).ok()) << "32768 * 65535 rows: within the limit";
  EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
  p.seqlen_q = 40000;
  p.set_contiguous_bnhd();
  const Status s = detail::make_plan(p, kA100, &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported);
  EXPECT_NE(std::string(s.message).find("at most 2^31 - 16"), std::string::npos) << s.message;
}

TEST(Plan, DecodeSplitsItChoosesKeepTheGridLimits) {
  // flash's own split count for the decode kernel: row blocks times splits
  // must fit the grid's x (validate checks only a count the caller names).
  int64_t d = 0;
  for (int64_t c : {64, 128, 256}) {
    if (d == 0 && head_dim_compiled(c)) d = c;
  }
  if (d == 0) GTEST_SKIP() << "no decode head dim compiled";
  AttentionParams p = dense(d, int64_t{1} << 24, int64_t{1} << 30, false);
  p.batch = 1;
  p.heads_q = 64;
  p.heads_kv = 1;
  p.backend = Backend::kDecode;
  p.set_contiguous_bnhd();
  p.workspace = const_cast<void*>(fake(4));
  p.workspace_bytes = size_t{1} << 62;
  ASSERT_TRUE(flash::validate(p).ok()) << flash::validate(p).message;
  Plan plan;
  const Status s = detail::make_plan(p, kA100, &plan);
  EXPECT_EQ(s.code, StatusCode::kUnsupported) << "splits planned: " << plan.num_splits;
  EXPECT_NE(std::string(s.message).find("CTAs along x"), std::string::npos) << s.message;
  p.workspace = nullptr;  // no workspace, no split: the grid fits
  p.workspace_bytes = 0;
  EXPECT_TRUE(detail::make_plan(p, kA100, &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);
}

TEST(Plan, Fp8PrefillRunsTheHopperFp8Kernel) {
  // q_dtype e4m3: the FP8 kernel, unsplit, its workspace V^T; on Hopper
  // only, at a compiled head dim.
  for (int64_t d : {64, 128, 256}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    AttentionParams p = dense(d, 4096, 4096, d == 128);
    p.q_dtype = p.kv_dtype = KvDType::kFloat8E4M3;
    Plan plan;
    const Status s = detail::make_plan(p, kH200, &plan);
    if (!kHasSm90 || !head_dim_compiled(d)) {
      EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
      continue;
    }
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_TRUE(plan.fp8_prefill);
    ASSERT_EQ(plan.num_candidates, 1);
    EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
    EXPECT_EQ(plan.num_splits, 1);
    EXPECT_EQ(plan.mask, d == 128 ? MaskVariant::kCausal : MaskVariant::kTail);
    EXPECT_FALSE(plan.tunable);
    // 2 sequences of 4096 keys, 8 K/V heads of d rows, 8192 + 2 * 240 columns.
    EXPECT_EQ(plan.workspace_wanted, static_cast<size_t>(8 * d * 8672));
    EXPECT_EQ(plan.workspace_bytes, plan.workspace_wanted);
    KernelChoice choice;
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
    EXPECT_EQ(std::string(choice.name).rfind("sm90 fp8 ", 0), 0u) << choice.name;
    // A left window runs the window variant; a right edge alone, the causal one.
    AttentionParams window = p;
    window.causal = false;
    window.window_left = 256;
    ASSERT_TRUE(detail::make_plan(window, kH200, &plan).ok());
    EXPECT_EQ(plan.mask, MaskVariant::kWindow);
    window.window_left = -1;
    window.window_right = 16;
    ASSERT_TRUE(detail::make_plan(window, kH200, &plan).ok());
    EXPECT_EQ(plan.mask, MaskVariant::kCausal);
    const Status a100 = detail::make_plan(p, kA100, &plan);
    EXPECT_EQ(a100.code, StatusCode::kUnsupported);
    EXPECT_NE(std::string(a100.message).find("sm_90 (Hopper) only"), std::string::npos) << a100.message;
    // No keys: planned (every row outputs zeros), K's map given a row.
    AttentionParams empty = p;
    empty.seqlen_k = 0;
    empty.set_contiguous_bnhd();
    const Status none = detail::make_plan(empty, kH200, &plan);
    EXPECT_TRUE(none.ok()) << none.message;
  }
}

TEST(Plan, HeadDimRunsOnTheNextCompiledKernel) {
  // The smallest compiled head dim at least d (96 or a multiple of 64: `sm90`), or 0.
  auto next_compiled = [](int64_t d, bool sm90) -> int64_t {
    for (int64_t c = d; c <= 256; ++c) {
      if (head_dim_compiled(c) && (!sm90 || c % 64 == 0 || c == 96)) return c;
    }
    return 0;
  };
  for (int64_t d = 8; d <= 256; d += 8) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    const int64_t k80 = next_compiled(d, false);
    const int64_t k90 = next_compiled(d, true);
    Plan plan;
    const Status planned = detail::make_plan(dense(d, 2048, 2048, true), kH200, &plan);
    if (k80 == 0) {
      EXPECT_EQ(k90, 0);
      EXPECT_EQ(planned.code, StatusCode::kUnsupported);
      continue;
    }
    ASSERT_TRUE(planned.ok()) << planned.message;
    ASSERT_GT(plan.num_candidates, 0);
    EXPECT_EQ(plan.candidates[0].backend, kHasSm90 && k90 != 0 ? Backend::kSm90 : Backend::kSm80);

    // 4 splits over 2 x 32 query rows of W + 1 floats each: W is the sm80
    // and decode kernels' head dim when the call is forced onto them, and
    // the wider of theirs and the Hopper kernel's when that kernel may run.
    for (Backend b : {Backend::kDecode, Backend::kSm80, Backend::kAuto}) {
      SCOPED_TRACE("backend " + std::to_string(static_cast<int>(b)));
      AttentionParams split = dense(d, 1, 32768);
      split.backend = b;
      split.num_splits = 4;
      split.workspace = const_cast<void*>(fake(4));
      split.workspace_bytes = size_t{1} << 30;
      ASSERT_TRUE(detail::make_plan(split, kH200, &plan).ok());
      EXPECT_EQ(plan.num_splits, 4);
      const int64_t width = b == Backend::kAuto && kHasSm90 ? std::max(k80, k90) : k80;
      EXPECT_EQ(plan.workspace_bytes, size_t{4} * 64 * static_cast<size_t>(width + 1) * sizeof(float));
    }
  }
}

AttentionParams decode_call(int64_t head_dim, int64_t batch, int64_t seqlen_k) {
  AttentionParams p = dense(head_dim, 1, seqlen_k);
  p.batch = batch;
  p.set_contiguous_bnhd();
  return p;
}

// flash's split count: about one CTA per SM on a dense cache (0.9 x 132 =
// 119 CTAs, counted as (batch, K/V head) x splits), at most half the K/V
// blocks (all of them on a dense cache above head dim 128), none once the
// batch fills the GPU; a paged cache takes more.
// (Short caches: DecodeSplitsOnlyWhereTheCombinePays.)
TEST(Plan, DecodeSplitsAboutOneCtaPerSm) {
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    auto wanted = [](const AttentionParams& p) {
      Plan plan;
      EXPECT_TRUE(detail::make_plan(p, kH200, &plan).ok());
      return plan.splits_wanted;
    };
    AttentionParams p = decode_call(hd, 1, 32768);
    EXPECT_EQ(wanted(p), 15) << hd;  // 8 CTAs x 15 = 120
    p.batch = 8;
    EXPECT_EQ(wanted(p), 2) << hd;  // 64 x 2 = 128
    p.batch = 15;
    EXPECT_EQ(wanted(p), 1) << hd;  // 120 CTAs
    p = decode_call(hd, 1, 100);
    EXPECT_EQ(wanted(p), 1) << hd;
    p.num_splits = 7;  // asked for: taken as is
    p.workspace = const_cast<void*>(fake(4));
    p.workspace_bytes = size_t{1} << 30;
    EXPECT_EQ(wanted(p), 7) << hd;
    AttentionParams dense_cache = decode_call(hd, 1, 32768);
    AttentionParams paged = dense_cache;
    paged.block_table = static_cast<const int32_t*>(fake(7));
    paged.page_size = 256;
    paged.max_pages_per_seq = 128;
    paged.num_pages = 256;
    paged.block_table_batch_stride = 128;
    paged.k_batch_stride = paged.v_batch_stride = 256 * paged.k_seq_stride;
    ASSERT_TRUE(validate(paged).ok()) << validate(paged).message;
    EXPECT_GT(wanted(paged), wanted(dense_cache)) << hd;
    // Paged: at least four blocks of 64 keys a split (4096 keys: 16), and
    // no split once the (batch, K/V head) CTAs number the SMs (32 x 8).
    AttentionParams short_paged = paged;
    short_paged.seqlen_k = 4096;
    short_paged.max_pages_per_seq = 16;
    short_paged.block_table_batch_stride = 16;
    ASSERT_TRUE(validate(short_paged).ok()) << validate(short_paged).message;
    EXPECT_EQ(wanted(short_paged), 16) << hd;
    AttentionParams full_paged = paged;
    full_paged.batch = 32;
    full_paged.num_pages = 32 * 128;
    ASSERT_TRUE(validate(full_paged).ok()) << validate(full_paged).message;
    EXPECT_EQ(wanted(full_paged), 1) << hd;
  }
}

// A paged e4m3 cache counts two CTAs an SM whatever the shared memory (the
// split counts measured fastest): at head dim 64 (52 KiB, four by it)
// 32k keys on 16-key pages want no split at batch 32 (256 CTAs fill 264
// slots), 4 at batch 8 and 32 at batch 1.
TEST(Plan, Fp8PagedDecodeCountsTwoCtasAnSm) {
  if (!head_dim_compiled(64)) GTEST_SKIP() << "head_dim 64 not compiled";
  for (const auto& [batch, splits] : {std::pair<int64_t, int>{32, 1}, {8, 4}, {1, 32}}) {
    AttentionParams p = decode_call(64, batch, 32768);
    make_paged(p, 16);
    p.kv_dtype = KvDType::kFloat8E4M3;
    ASSERT_TRUE(validate(p).ok()) << validate(p).message;
    Plan plan;
    ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    EXPECT_EQ(plan.splits_wanted, splits) << "batch " << batch;
  }
}

// Devices with 99 KiB of shared memory a block (sm_86, sm_89): the decode
// kernel needs 101-102 KiB at head dims 97-128 (three stages of 64 keys, or
// of 128 fp8 keys), so there decode-length calls at head dim 128 run on its
// two-stage variant (69-70 KiB; candidate 1), as do fp8 caches at 256 (73.5
// KiB; an fp8 cache runs on no other kernel there); head dims 64 and 192
// keep the default (fp8: 52 and 78 KiB). An H200 never gets the variant.
TEST(Plan, DecodeOnNinetyNineKibDevices) {
  if (head_dim_compiled(128)) {
    AttentionParams p = decode_call(128, 1, 4096);
    Plan plan;
    ASSERT_TRUE(detail::make_plan(p, kL40, &plan).ok());
    ASSERT_EQ(plan.num_candidates, 1);
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
    EXPECT_EQ(plan.candidates[0].index, 1);
    p.backend = Backend::kDecode;
    ASSERT_TRUE(detail::make_plan(p, kL40, &plan).ok());
    EXPECT_EQ(plan.candidates[0].index, 1);
    KernelChoice choice;
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
    EXPECT_STREQ(choice.name, "decode 16x64 4w 2st 1 split");
    p = decode_call(128, 1, 4096);
    p.seqlen_q = 100;  // a chunk: the sm80 kernel, as before
    p.set_contiguous_bnhd();
    ASSERT_TRUE(detail::make_plan(p, kL40, &plan).ok());
    EXPECT_EQ(plan.candidates[0].backend, Backend::kSm80);
  }
  for (int64_t hd : {64, 128, 192, 256}) {
    if (!head_dim_compiled(hd)) continue;
    const bool two_stage = hd == 128 || hd == 256;
    for (int64_t seqlen_q : {1, 100}) {  // decode, and a chunk (no Hopper kernel there)
      AttentionParams p = decode_call(hd, 1, 4096);
      p.seqlen_q = seqlen_q;
      p.set_contiguous_bnhd();
      p.kv_dtype = KvDType::kFloat8E4M3;
      Plan plan;
      const Status s = detail::make_plan(p, kL40, &plan);
      ASSERT_TRUE(s.ok()) << hd << ": " << s.message;
      ASSERT_EQ(plan.num_candidates, 1);
      EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode) << hd;
      EXPECT_EQ(plan.candidates[0].index, two_stage ? 1 : 0) << hd;
      KernelChoice choice;
      ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
      EXPECT_EQ(choice.stages, two_stage ? 2 : 3) << hd;
      EXPECT_LE(decode::smem_bytes(hd, true, choice.stages), kL40.max_smem) << hd;
      if (seqlen_q == 1) {
        ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
        EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode) << hd;
        EXPECT_EQ(plan.candidates[0].index, 0) << hd;
        // Where there is no two-stage variant, candidate 1 describes nothing.
        AttentionParams bf16 = p;
        bf16.kv_dtype = KvDType::kSame;
        EXPECT_EQ(detail::describe(plan, detail::Candidate{Backend::kDecode, 1}, bf16, &choice), hd == 128) << hd;
        EXPECT_EQ(detail::describe(plan, detail::Candidate{Backend::kDecode, 1}, p, &choice), two_stage) << hd;
      }
    }
  }
  if (head_dim_compiled(64)) {
    Plan plan;
    ASSERT_TRUE(detail::make_plan(decode_call(64, 1, 4096), kL40, &plan).ok());
    EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
  }
}

// Head dims above 128 on devices with 99 KiB of shared memory a block: the
// sm80 kernel's 64 x 32 fallback tiles (72 KiB at head dim 192, 96 at 256),
// offered only there; an A100 keeps its own tiles at 256 (128 x 64 does not
// fit its 163 KiB, 64 x 64 does) and an H200 none of the fallbacks.
TEST(Plan, HeadDimsAboveOneTwentyEightOnNinetyNineKibDevices) {
  for (int64_t hd : {192, 256}) {
    if (!head_dim_compiled(hd)) continue;
    SCOPED_TRACE("head_dim " + std::to_string(hd));
    const int fallback = hd == 192 ? 1 : 2;
    ASSERT_LE(sm80::candidate_smem_bytes(hd, fallback), kL40.max_smem);
    EXPECT_TRUE(sm80::candidate_is_fallback(hd, fallback));
    for (bool causal : {false, true}) {
      for (const AttentionParams& p : {dense(hd, 2048, 2048, causal), decode_call(hd, 4, 4096)}) {
        Plan plan;
        const Status s = detail::make_plan(p, kL40, &plan);
        ASSERT_TRUE(s.ok()) << s.message;
        ASSERT_EQ(plan.num_candidates, 1);
        EXPECT_EQ(plan.candidates[0].backend, Backend::kSm80);
        EXPECT_EQ(plan.candidates[0].index, fallback);
        KernelChoice choice;
        ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
        EXPECT_STREQ(choice.name, "sm80 64x32 4w 2st");
      }
    }
    for (const DeviceCaps& caps : {kA100, kH200}) {
      Plan plan;
      ASSERT_TRUE(detail::make_plan(dense(hd, 2048, 2048, true), caps, &plan).ok());
      for (int i = 0; i < plan.num_candidates; ++i) {
        EXPECT_FALSE(plan.candidates[i].backend == Backend::kSm80 && plan.candidates[i].index == fallback)
            << "sm_" << caps.major << caps.minor;
      }
    }
  }
}

// A short dense cache: a split must take at least five 64-key blocks off
// each CTA (four above head dim 128, where one block is in flight) to pay
// for the combine kernel, counted over seqlen_k (the cache's length); also
// where the workspace holds fewer splits than flash wants. Above head dim
// 128 a split may hold one block.
TEST(Plan, DecodeSplitsOnlyWhereTheCombinePays) {
  for (int64_t hd : {32, 64, 96, 128, 192, 256}) {
    if (!head_dim_compiled(hd)) continue;
    auto plan_of = [](const AttentionParams& p) {
      Plan plan;
      EXPECT_TRUE(detail::make_plan(p, kH200, &plan).ok());
      return plan;
    };
    auto wanted = [&](const AttentionParams& p) { return plan_of(p).splits_wanted; };
    const bool one_ahead = hd > 128;
    AttentionParams p = decode_call(hd, 1, 256);  // 4 blocks: 2 splits would save 2
    EXPECT_EQ(wanted(p), 1) << hd;
    p = decode_call(hd, 1, 448);  // 7 blocks: 3 splits save 4, 7 (above 128) save 6
    EXPECT_EQ(wanted(p), one_ahead ? 7 : 1) << hd;
    p = decode_call(hd, 1, 512);  // 8 blocks: 4 splits save 6, 8 (above 128) save 7
    EXPECT_EQ(wanted(p), one_ahead ? 8 : 4) << hd;
    p = decode_call(hd, 8, 448);  // 64 CTAs: 2 splits would save 3
    EXPECT_EQ(wanted(p), 1) << hd;
    p = decode_call(hd, 8, 512);  // 2 splits save 4
    EXPECT_EQ(wanted(p), one_ahead ? 2 : 1) << hd;
    p = decode_call(hd, 8, 1024);  // 2 splits save 8
    EXPECT_EQ(wanted(p), 2) << hd;

    // 512 keys want 4 splits (8 above head dim 128); a workspace of 3
    // (saving 5) gives 3, one of 2 (saving 4) none below head dim 192 and 2
    // above.
    p = decode_call(hd, 1, 512);
    const size_t per_split = detail::decode_workspace_bytes(p, 2) / 2;
    p.workspace = const_cast<void*>(fake(4));
    p.workspace_bytes = 3 * per_split;
    Plan plan = plan_of(p);
    EXPECT_EQ(plan.splits_wanted, one_ahead ? 8 : 4) << hd;
    EXPECT_EQ(plan.num_splits, 3) << hd;
    p.workspace_bytes = 2 * per_split;
    EXPECT_EQ(plan_of(p).num_splits, one_ahead ? 2 : 1) << hd;
    p.num_splits = 2;  // asked for: taken as is
    EXPECT_EQ(plan_of(p).num_splits, 2) << hd;
  }
}

// With num_splits = 0 the workspace never makes a valid call fail: a
// workspace too small for flash's choice means fewer splits, none means
// one; attention_workspace_size's figure (workspace_wanted) buys the full choice.
TEST(Plan, AutomaticSplitsFitTheWorkspaceGiven) {
  if (!head_dim_compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  AttentionParams p = decode_call(128, 1, 65536);
  Plan plan;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.num_splits, 1);  // no workspace
  EXPECT_GT(plan.splits_wanted, 1);
  const size_t full = plan.workspace_wanted;
  EXPECT_EQ(full, detail::decode_workspace_bytes(p, plan.splits_wanted));
  for (size_t bytes : {size_t{1024}, full / 3, full - 1, full, full * 2}) {
    p.workspace = const_cast<void*>(fake(4));
    p.workspace_bytes = bytes;
    ASSERT_TRUE(validate(p).ok()) << validate(p).message;
    ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    EXPECT_LE(plan.workspace_bytes, bytes);
    EXPECT_LE(plan.num_splits, plan.splits_wanted);
    EXPECT_EQ(plan.num_splits == plan.splits_wanted, bytes >= full) << bytes;
    if (plan.num_splits < plan.splits_wanted) {
      EXPECT_GT(detail::decode_workspace_bytes(p, plan.num_splits + 1), bytes);
    }
  }
}

// The workspace size is computed without wrapping: too large is SIZE_MAX,
// and validate() refuses the call (such a split also has too many rows to combine).
TEST(Plan, WorkspaceSizeDoesNotWrap) {
  AttentionParams p = dense(32, int64_t{1} << 25, 1);
  p.batch = 1024;
  p.heads_q = p.heads_kv = 32768;
  p.num_splits = 128;
  EXPECT_EQ(detail::decode_workspace_bytes(p, 128), SIZE_MAX);
  p.workspace = const_cast<void*>(fake(4));
  p.workspace_bytes = 256;
  EXPECT_FALSE(validate(p).ok());
  if (head_dim_compiled(128)) {  // the decode kernel's workspace at head dim 128
    EXPECT_EQ(detail::decode_workspace_bytes(decode_call(128, 1, 1024), 2), size_t{2} * 1 * 32 * 129 * 4);
  }
}

// The prefill kernels split the keys too: every float32 accumulation within
// kKeysPerAccumulation keys, and calls with few query tiles over the SMs;
// never the seed sweep's shapes; the workspace rule as for decode. A split
// Hopper plan offers no sm80 fallback (the autotuner does not tune splits).
TEST(Plan, HopperSplitsLongKeysAndFewTiles) {
  if (!kHasSm90 || !head_dim_compiled(128)) GTEST_SKIP() << "no sm90 kernel for head_dim 128 in this build";
  auto plan_of = [](const AttentionParams& p) {
    Plan plan;
    EXPECT_TRUE(validate(p).ok()) << validate(p).message;
    EXPECT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    return plan;
  };
  auto with_workspace = [](AttentionParams p) {
    p.workspace = const_cast<void*>(fake(4));
    p.workspace_bytes = size_t{1} << 40;
    return p;
  };
  // 64 queries x 2^22 keys, 32 heads: 32 tiles; 16 splits keep 2^18 keys each.
  AttentionParams longk = dense(128, 64, int64_t{1} << 22);
  longk.batch = 1;
  longk.set_contiguous_bnhd();
  Plan plan = plan_of(longk);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.splits_wanted, 16);
  EXPECT_EQ(plan.num_splits, 1);  // no workspace given
  EXPECT_EQ(plan.workspace_wanted, detail::decode_workspace_bytes(longk, 16));
  plan = plan_of(with_workspace(longk));
  EXPECT_EQ(plan.num_splits, 16);
  EXPECT_FALSE(plan.tunable);
  for (int i = 0; i < plan.num_candidates; ++i) EXPECT_EQ(plan.candidates[i].backend, Backend::kSm90) << i;
  KernelChoice choice;
  ASSERT_TRUE(detail::describe(plan, plan.candidates[0], longk, &choice));
  EXPECT_NE(std::strstr(choice.name, "16 splits"), nullptr) << choice.name;
  // Few tiles, short keys: 32 tiles of 128 rows, 8192 keys: 4 splits (132 / 32).
  AttentionParams few = dense(128, 128, 8192);
  few.batch = 1;
  few.set_contiguous_bnhd();
  EXPECT_EQ(plan_of(with_workspace(few)).num_splits, 4);
  // The seed sweep's shapes fill the GPU: no split.
  for (int64_t n : {512, 2048, 16384}) {
    AttentionParams sweep = dense(128, n, n, true);
    sweep.batch = 16384 / n;
    sweep.set_contiguous_bnhd();
    EXPECT_EQ(plan_of(with_workspace(sweep)).num_splits, 1) << n;
  }
  // Long keys behind many tiles: only the accuracy floor (2^20 / 2^18).
  AttentionParams many = dense(128, 4096, int64_t{1} << 20);
  EXPECT_EQ(plan_of(with_workspace(many)).num_splits, 4);
  // ... unless the partial results would pass kMaxSplitWorkspace.
  many.seqlen_q = 65536;
  many.set_contiguous_bnhd();
  EXPECT_EQ(plan_of(with_workspace(many)).num_splits, 1);
  // A split asked for runs on the Hopper kernel (forced or not), or on the
  // sm80 kernel where the Hopper kernel cannot take the call.
  AttentionParams asked = with_workspace(dense(128, 2048, 2048));
  asked.num_splits = 3;
  plan = plan_of(asked);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.num_splits, 3);
  asked.backend = Backend::kSm90;
  EXPECT_EQ(plan_of(asked).num_splits, 3);
  asked.backend = Backend::kAuto;
  asked.seqused_k = static_cast<const int32_t*>(fake(5));
  plan = plan_of(asked);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm80);
  EXPECT_EQ(plan.num_splits, 3);
  // A KV-cache call flash would split (here for accuracy) runs on the sm80
  // kernel; forced onto the Hopper kernel it runs there unsplit.
  AttentionParams cache = with_workspace(longk);
  cache.seqused_k = static_cast<const int32_t*>(fake(5));
  plan = plan_of(cache);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm80);
  EXPECT_GT(plan.num_splits, 1);
  cache.backend = Backend::kSm90;
  plan = plan_of(cache);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.num_candidates, 1);
  EXPECT_EQ(plan.num_splits, 1);
  // Without a workspace nothing splits: kAuto keeps it on the Hopper kernel.
  AttentionParams no_workspace = longk;
  no_workspace.seqused_k = static_cast<const int32_t*>(fake(5));
  plan = plan_of(no_workspace);
  EXPECT_EQ(plan.candidates[0].backend, Backend::kSm90);
  EXPECT_EQ(plan.num_splits, 1);
  // It still asks for the split's workspace (what attention_workspace_size
  // reports), and given those bytes the call moves to the split sm80 kernel.
  const Plan split = plan_of(with_workspace(no_workspace));
  EXPECT_EQ(split.candidates[0].backend, Backend::kSm80);
  EXPECT_GT(split.num_splits, 1);
  EXPECT_EQ(plan.splits_wanted, split.num_splits);
  EXPECT_EQ(plan.workspace_wanted, split.workspace_bytes);
  EXPECT_GT(plan.workspace_wanted, 0u);
  // Ampere: the sm80 kernel, split the same way (108 SMs: 3 per tile for occupancy, 16 for accuracy).
  Plan a100;
  ASSERT_TRUE(detail::make_plan(with_workspace(longk), kA100, &a100).ok());
  EXPECT_EQ(a100.candidates[0].backend, Backend::kSm80);
  EXPECT_EQ(a100.num_splits, 16);
  AttentionParams few_a100 = with_workspace(few);
  ASSERT_TRUE(detail::make_plan(few_a100, kA100, &a100).ok());
  EXPECT_EQ(a100.num_splits, 3);
}

// The decode kernel keeps the same accuracy floor: a batch that fills the
// GPU on its own still splits 2^20 keys in four.
TEST(Plan, DecodeSplitsLongKeysForAccuracy) {
  if (!head_dim_compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  AttentionParams p = decode_call(128, 64, int64_t{1} << 20);
  Plan plan;
  ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
  EXPECT_EQ(plan.candidates[0].backend, Backend::kDecode);
  EXPECT_EQ(plan.splits_wanted, 4);
}

// How the Hopper kernel loads a paged cache: TMA boxes inside a page where
// pages hold a multiple of 8 keys, a cp.async gather for other sizes, and
// the gather at head dim 256 where boxes would hold 8 or 16 rows.
TEST(Plan, Sm90GathersPagesTmaCannotBoxWell) {
  struct Row {
    int64_t page_size;
    int head_dim, block_n;
    bool gathers;
  };
  const Row rows[] = {{1, 128, 128, true},   {3, 64, 128, true},    {12, 192, 112, true},  {8, 128, 128, false},
                      {16, 128, 128, false}, {16, 64, 128, false},  {8, 256, 64, true},    {16, 256, 64, true},
                      {48, 256, 64, true},  {32, 256, 64, false},  {64, 256, 64, false},  {256, 256, 64, false}};
  for (const Row& r : rows) {
    EXPECT_EQ(sm90::gathers_pages(r.page_size, r.head_dim, r.block_n), r.gathers)
        << "page_size " << r.page_size << ", head_dim " << r.head_dim;
    EXPECT_EQ(sm90::paged_problem(r.page_size, 1000), nullptr);
  }
  EXPECT_NE(sm90::paged_problem(64, int64_t{1} << 31), nullptr);
  EXPECT_EQ(sm90::paged_problem(1, int64_t{1} << 31), nullptr);  // gathered: int32 table entries, no TMA coordinate
}

// The kernel's name says when the Hopper kernel gathers a paged cache
// (what query_kernel_choice and flash_bench report).
TEST(Plan, Sm90KernelNameSaysWhenItGathers) {
  if (!kHasSm90) GTEST_SKIP() << "no Hopper kernel in this build";
  struct Row {
    int64_t head_dim, page_size;
    bool gathers;
  };
  for (const Row& r : {Row{128, 1, true}, Row{128, 3, true}, Row{128, 16, false}, Row{64, 64, false}, Row{64, 1, true},
                       Row{256, 8, true}, Row{256, 16, true}, Row{256, 32, false}, Row{256, 64, false}}) {
    if (!head_dim_compiled(r.head_dim)) continue;
    AttentionParams p = dense(r.head_dim, 2048, 2048, true);
    make_paged(p, r.page_size);
    Plan plan;
    ASSERT_TRUE(detail::make_plan(p, kH200, &plan).ok());
    ASSERT_EQ(plan.candidates[0].backend, Backend::kSm90);
    KernelChoice choice;
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], p, &choice));
    const std::string name = choice.name;
    EXPECT_EQ(name.find(" gather") != std::string::npos, r.gathers)
        << name << ": head_dim " << r.head_dim << ", page_size " << r.page_size;
    // Head dims 64 and 256 gather on a kernel of their own (sm90::gather_tile):
    // 64 on a tile of its own, 256 on candidate 0's.
    const int gather_n = r.gathers ? sm90::gather_tile(r.head_dim).block_n : 0;
    if (gather_n != 0) {
      EXPECT_EQ(choice.block_n, gather_n) << name;
      const char* tile = r.head_dim == 64 ? "sm90 192x96 3wg 3st gather" : "sm90 128x64 2wg 2st gather";
      EXPECT_EQ(name.rfind(tile, 0), 0u) << name;
    }
  }
}

// Where the decode kernel does an append itself (no append kernel runs):
// the decode kernel's default (candidate 0), on sm_90 or newer, on a
// bf16/fp16 cache; an fp8 cache, the two-stage variant, the prefill
// kernels and sm_80 keep the append kernel.
TEST(Plan, DecodeDoesTheAppendOnlyOnItsOwnPaths) {
  AttentionParams p = dense(128, 1, 4096);
  p.seqused_k = static_cast<const int32_t*>(fake(5));
  p.k_new = fake(7);
  p.v_new = fake(8);
  p.seqlen_new = 1;
  Plan plan;
  plan.caps = kH200;
  const detail::Candidate decode{Backend::kDecode, 0};
  EXPECT_TRUE(detail::decode_does_append(plan, decode, p));
  EXPECT_FALSE(detail::decode_does_append(plan, detail::Candidate{Backend::kSm80, 0}, p));
  EXPECT_FALSE(detail::decode_does_append(plan, detail::Candidate{Backend::kSm90, 0}, p));
  AttentionParams fp8 = p;
  fp8.kv_dtype = KvDType::kFloat8E4M3;
  EXPECT_FALSE(detail::decode_does_append(plan, decode, fp8));
  plan.caps = kA100;
  EXPECT_FALSE(detail::decode_does_append(plan, decode, p));
  // An sm_12x with 99 KiB a block plans the two-stage variant (candidate
  // 1), which has no kernel doing the append: the append kernel runs first.
  if (head_dim_compiled(128)) {
    AttentionParams plain = dense(128, 1, 4096);
    ASSERT_TRUE(detail::make_plan(plain, device(12, 99), &plan).ok());
    ASSERT_EQ(plan.candidates[0].backend, Backend::kDecode);
    EXPECT_EQ(plan.candidates[0].index, 1);
    EXPECT_FALSE(detail::decode_does_append(plan, plan.candidates[0], p));
    EXPECT_TRUE(detail::decode_does_append(plan, decode, p));
  }
}

}  // namespace
}  // namespace flash
