// The inference-engine features of attention_forward against per-sequence
// references (tests/feature_case.h): varlen prefill, a dense KV cache with
// seqused_k, a paged KV cache with shuffled pages, sliding windows, softcap,
// their combinations, decode shapes with split-KV (explicit and automatic,
// deterministic), the workspace checks, and Backend::kSm90 refusing what it
// lacks. Every case runs on each backend that should take it: kAuto, kSm80
// and kDecode (kDecode takes any seqlen_q, so prefill cases run there too),
// and kSm90 where the case uses only what the Hopper kernel supports (varlen
// with total_q / total_k given, seqused_k on a dense cache, causal) and the
// device has it; everywhere else kSm90 must return kUnsupported and write
// nothing.
#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "device_tensor.h"
#include "feature_case.h"
#include "gpu_case.h"
#include "reference.h"

namespace flash::test {
namespace {

constexpr uint64_t kFeatureSeedBase = uint64_t{1} << 28;  // apart from the other tests' seeds

// The ragged lengths every varlen/paged test draws from: empty, one, around
// the 64-row tiles, and long.
constexpr int64_t kLengths[] = {0, 1, 17, 63, 64, 65, 300, 1000};
constexpr int kNumLengths = sizeof(kLengths) / sizeof(kLengths[0]);

// `lengths` rotated left by `shift`.
template <size_t kN>
std::vector<int64_t> rotate(const int64_t (&lengths)[kN], int shift) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < kN; ++i) v.push_back(lengths[(i + static_cast<size_t>(shift)) % kN]);
  return v;
}
std::vector<int64_t> rotated(int shift) { return rotate(kLengths, shift); }

// Ragged lengths around the Hopper kernel's 128- and 192-row query tiles and
// its K/V blocks: empty, one, short, one row either side of 128, long, and
// one row past 2048, so tiles end inside sequences and sequences end inside
// tiles.
constexpr int64_t kTileLengths[] = {0, 1, 17, 127, 128, 129, 1000, 2049};
constexpr int kNumTileLengths = sizeof(kTileLengths) / sizeof(kTileLengths[0]);

std::vector<int64_t> tile_rotated(int shift) { return rotate(kTileLengths, shift); }

// One flash call on a case: backend, num_splits, and whether to pass a
// workspace of attention_workspace_size() bytes.
struct FlashRun {
  Backend backend = Backend::kAuto;
  int32_t num_splits = 0;
  bool workspace = false;

  std::string name() const {
    return std::string(backend_name(backend)) + ", num_splits " + std::to_string(num_splits) +
           (workspace ? ", workspace from attention_workspace_size" : ", no workspace");
  }
};

// Each backend that takes every feature, with flash choosing (without a
// workspace, so never splitting).
const std::vector<FlashRun> kAllBackends = {{Backend::kAuto}, {Backend::kSm80}, {Backend::kDecode}};

// Split-KV runs of a decode-shaped case, plus the backends without splits.
const std::vector<FlashRun> kDecodeRuns = {
    {Backend::kDecode, 1}, {Backend::kDecode, 3, true}, {Backend::kDecode, 7, true}, {Backend::kDecode, 0, true},
    {Backend::kAuto, 0},   {Backend::kAuto, 0, true},   {Backend::kAuto, 7, true},   {Backend::kSm80, 1},
};

bool bitwise_equal(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

// Relative L2 distance of two outputs (for premises: a feature must change the result).
double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

class Features : public GpuTest {
 protected:
  // The case's params for `run`, with a workspace from
  // attention_workspace_size() when asked (allocated into `workspace`).
  ::testing::AssertionResult params_for(const FeatureCase& c, const FlashRun& run, DeviceBuffer* workspace,
                                        AttentionParams* p) {
    *p = c.params();
    p->backend = run.backend;
    p->num_splits = run.num_splits;
    if (!run.workspace) return ::testing::AssertionSuccess();
    size_t bytes = 0;
    const Status s = attention_workspace_size(*p, &bytes);
    if (!s.ok()) return ::testing::AssertionFailure() << "attention_workspace_size: " << s.message;
    if (bytes == 0) return ::testing::AssertionSuccess();
    const cudaError_t err = workspace->allocate(bytes);
    if (err != cudaSuccess) return ::testing::AssertionFailure() << "cudaMalloc: " << cudaGetErrorString(err);
    p->workspace = workspace->ptr;
    p->workspace_bytes = bytes;
    return ::testing::AssertionSuccess();
  }

  // Runs `c` with `run` and checks O and the LSE against the reference and
  // that O's padding was not written. A call that may split (workspace
  // given, or num_splits > 1) runs twice and must give the same bits.
  void expect_run_matches(FeatureCase& c, const FlashRun& run, const std::vector<double>& ref_o,
                          const std::vector<double>& ref_lse) {
    SCOPED_TRACE(run.name());
    DeviceBuffer workspace;
    AttentionParams p;
    ASSERT_TRUE(params_for(c, run, &workspace, &p));
    expect_params_match(c, p, ref_o, ref_lse);
  }

  // The same for the call `p` (the case's params, edited).
  void expect_params_match(FeatureCase& c, const AttentionParams& p, const std::vector<double>& ref_o,
                           const std::vector<double>& ref_lse) {
    const Status s = c.run(p);
    if (!s.ok()) {
      ADD_FAILURE() << "attention_forward failed: " << s.message;
      return;
    }
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    Errors errors;
    EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse, &errors));
    EXPECT_TRUE(c.padding_untouched());
    worst_.add(errors);
    if (p.workspace != nullptr || p.num_splits > 1) {
      std::vector<uint16_t> o1, o2;
      std::vector<float> lse1, lse2;
      ASSERT_TRUE(c.read_raw(&o1, &lse1));
      const Status again = c.run(p);
      ASSERT_TRUE(again.ok()) << again.message;
      ASSERT_TRUE(c.read_raw(&o2, &lse2));
      EXPECT_TRUE(bitwise_equal(o1, o2)) << "O differs between two identical calls";
      EXPECT_TRUE(bitwise_equal(lse1, lse2)) << "LSE differs between two identical calls";
    }
  }

  // Backend::kSm90 on `c`: where sm90_runs(p) it must match the reference
  // like any backend; elsewhere (a feature it lacks, varlen without the
  // totals, no Hopper kernel for this device or head dim) it must return
  // kUnsupported and write nothing.
  void expect_sm90(FeatureCase& c, const AttentionParams& params, const std::vector<double>& ref_o,
                   const std::vector<double>& ref_lse) {
    SCOPED_TRACE("backend sm90");
    AttentionParams p = params;
    p.backend = Backend::kSm90;
    if (sm90_runs(p)) {
      expect_params_match(c, p, ref_o, ref_lse);
      ++sm90_runs_;
      return;
    }
    const Status s = c.run(p);
    EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
    EXPECT_TRUE(c.outputs_untouched());
  }

  // For compute-sanitizer (scripts/sanitize.sh runs the *Sanitizer* tests,
  // racecheck only those): no cuBLAS kernel runs, so the reference is
  // flash's own sm80 kernel and every other run must agree with it.
  void check_against_sm80(const FeatureConfig& cfg, const std::vector<FlashRun>& runs) {
    SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed) + ", reference: sm80");
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    AttentionParams p = c.params();
    p.backend = Backend::kSm80;
    const Status s = c.run(p);
    ASSERT_TRUE(s.ok()) << s.message;
    std::vector<float> o, lse;
    ASSERT_TRUE(c.read_output(&o, &lse));
    const std::vector<double> ref_o(o.begin(), o.end()), ref_lse(lse.begin(), lse.end());
    for (const FlashRun& run : runs) {
      expect_run_matches(c, run, ref_o, ref_lse);
      if (HasFatalFailure()) return;
    }
    expect_sm90(c, c.params(), ref_o, ref_lse);
  }

  // Builds `cfg`, computes its reference, runs every entry of `runs`, then
  // Backend::kSm90 (see expect_sm90).
  void check_case(const FeatureConfig& cfg, const std::vector<FlashRun>& runs = kAllBackends) {
    SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed));
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    std::vector<double> ref_o, ref_lse;
    // FLASH_TEST_FEATURE_REF=cpu checks against the float64 CPU reference
    // instead of cuBLAS (slow; for investigating a failure).
    const char* which = std::getenv("FLASH_TEST_FEATURE_REF");
    const bool cpu = which != nullptr && std::string(which) == "cpu";
    ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse, cpu ? SequenceReference::kCpu : SequenceReference::kCublas));
    rows_without_keys_ += c.rows_seeing_no_key();
    for (const FlashRun& run : runs) {
      expect_run_matches(c, run, ref_o, ref_lse);
      if (HasFatalFailure()) return;
    }
    expect_sm90(c, c.params(), ref_o, ref_lse);
    if (HasFatalFailure()) return;
    ++cases_;
  }

  void TearDown() override {
    if (cases_ > 0) {
      std::printf("[flash tests] %d feature cases (%d run on sm90), %" PRId64
                  " (row, head) pairs seeing no key; worst rel_l2 %.3g, "
                  "max_abs/max|ref| %.3g, lse %.3g\n",
                  cases_, sm90_runs_, rows_without_keys_, worst_.worst.rel_l2, worst_.worst.max_abs_rel(),
                  worst_.worst.max_lse);
    }
    GpuTest::TearDown();
  }

  uint64_t next_seed() { return case_seed(kFeatureSeedBase + seed_index_++); }

  WorstErrors worst_;
  int cases_ = 0;
  int sm90_runs_ = 0;  // kSm90 runs checked against the reference
  int64_t rows_without_keys_ = 0;
  uint64_t seed_index_ = 0;
};

// A feature config with the usual fields.
FeatureConfig make_config(DType dtype, int64_t head_dim, int64_t heads_q, int64_t heads_kv, uint64_t seed) {
  FeatureConfig cfg;
  cfg.dtype = dtype;
  cfg.head_dim = head_dim;
  cfg.heads_q = heads_q;
  cfg.heads_kv = heads_kv;
  cfg.seed = seed;
  return cfg;
}

// Dense Q: `batch` sequences of `rows` query rows.
std::vector<int64_t> repeat(int64_t value, size_t count) {
  return std::vector<int64_t>(count, value);
}

// ---------------------------------------------------------------- varlen prefill

// Q and K/V both packed with ragged lengths (0, 1, 17, 63, 64, 65, 300, 1000,
// paired differently for q and k, so causal rows with no key appear), Q
// packed over a dense K/V, and dense Q over packed K/V; then, for head dims
// 64, 128 and 256 (what the Hopper kernel has), causal and not, the lengths
// around its 128/192-row tiles (0, 1, 17, 127, 128, 129, 1000, 2049), packed
// Q and K/V, packed Q over a dense cache with seqused_k, and dense Q over
// packed K/V. total_q / total_k are always given (exact), so kSm90 runs
// every one of these on a Hopper GPU.
TEST_F(Features, VarlenPrefill) {
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (bool causal : {false, true}) {
        ++variant;
        const int64_t heads_q = variant % 2 ? 8 : 4, heads_kv = variant % 2 ? 2 : 4;

        FeatureConfig both = make_config(dtype, hd, heads_q, heads_kv, next_seed());
        both.causal = causal;
        both.varlen_q = true;
        both.max_seqlen_q_slack = variant % 3 == 0 ? 29 : 0;
        both.seqlens_q = rotated(variant);
        both.seqlens_k = rotated(variant + 3);
        both.kv = KvLayout::kVarlen;
        both.padded = variant % 2 == 0;
        both.with_lse = variant % 4 != 3;
        check_case(both);
        if (HasFatalFailure()) return;

        FeatureConfig q_only = make_config(dtype, hd, 6, 2, next_seed());
        q_only.causal = causal;
        q_only.varlen_q = true;
        q_only.seqlens_q = rotated(variant + 1);
        q_only.seqlens_k = repeat(129, kNumLengths);
        q_only.kv = KvLayout::kDense;
        q_only.padded = variant % 2 == 1;
        check_case(q_only);
        if (HasFatalFailure()) return;

        FeatureConfig k_only = make_config(dtype, hd, 4, 1, next_seed());
        k_only.causal = causal;
        k_only.seqlens_q = repeat(65, kNumLengths);
        k_only.seqlens_k = rotated(variant + 5);
        k_only.kv = KvLayout::kVarlen;
        check_case(k_only);
        if (HasFatalFailure()) return;
      }
    }
  }
  if (head_dim_compiled(256)) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      FeatureConfig cfg = make_config(dtype, 256, 4, 2, next_seed());
      cfg.causal = dtype == DType::kFloat16;
      cfg.varlen_q = true;
      cfg.seqlens_q = rotated(2);
      cfg.seqlens_k = rotated(6);
      cfg.kv = KvLayout::kVarlen;
      check_case(cfg);
      if (HasFatalFailure()) return;
    }
  }

  // Around the Hopper kernel's tiles.
  variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (bool causal : {false, true}) {
        ++variant;
        FeatureConfig both = make_config(dtype, hd, variant % 2 ? 8 : 4, variant % 2 ? 2 : 4, next_seed());
        both.causal = causal;
        both.varlen_q = true;
        both.max_seqlen_q_slack = variant % 3 == 0 ? 61 : 0;
        both.seqlens_q = tile_rotated(variant);
        both.seqlens_k = tile_rotated(variant + 3);
        both.kv = KvLayout::kVarlen;
        both.padded = variant % 2 == 0;
        both.tail_rows = variant % 2 ? 37 : 0;
        both.with_lse = variant % 4 != 2;
        check_case(both);
        if (HasFatalFailure()) return;

        if (variant % 2) {
          // Chunked prefill over a dense cache: packed Q, seqused_k keys of
          // a cache allocated for 2100.
          FeatureConfig cache = make_config(dtype, hd, 8, 1, next_seed());
          cache.causal = causal;
          cache.varlen_q = true;
          cache.seqlens_q = tile_rotated(variant + 1);
          cache.seqlens_k = tile_rotated(variant + 6);
          cache.kv = KvLayout::kDense;
          cache.use_seqused_k = true;
          cache.k_capacity = 2100;
          cache.tail_rows = 64;
          check_case(cache);
        } else {
          FeatureConfig k_only = make_config(dtype, hd, 6, 3, next_seed());
          k_only.causal = causal;
          k_only.seqlens_q = repeat(129, kNumTileLengths);
          k_only.seqlens_k = tile_rotated(variant + 2);
          k_only.kv = KvLayout::kVarlen;
          k_only.tail_rows = 19;
          check_case(k_only);
        }
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GT(rows_without_keys_, 0) << "the premise: some causal rows see no key";
}

// The natural varlen layout: in packed Q and O the rows right after a short
// sequence (1, 5, 17, 127 rows: a fraction of a tile) are the next
// sequence's, and after the last sequence come rows that are no sequence's
// (tail_rows, NaN). A kernel that writes a whole tile would overwrite the
// next sequence's first rows (caught by the full comparison) or the tail
// (caught by the padding check); one that reads K/V past a sequence's keys
// reads the next sequence's keys (wrong result) or the NaN tail (NaN).
TEST_F(Features, VarlenNeighbouringSequences) {
  const std::vector<int64_t> lengths_q = {1, 2049, 5, 129, 0, 17, 1000, 127};
  const std::vector<int64_t> lengths_k = {3, 2049, 17, 129, 64, 1, 1100, 127};
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool causal : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, next_seed());
      cfg.causal = causal;
      cfg.varlen_q = true;
      cfg.seqlens_q = lengths_q;
      cfg.seqlens_k = lengths_k;
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 200;  // more than a tile: a whole tile past the last sequence stays unwritten
      cfg.padded = variant % 3 == 0;
      check_case(cfg);
      if (HasFatalFailure()) return;
    }
  }
}

// Masked calls shift their blocks up by the last block's padding (whole
// 64-row slices; 192-row tiles always, 128-row tiles from 16 query blocks
// on), so block 0 starts at a
// negative row (kernels/sm90/tile_scheduler.cuh, first_row): its padding
// warpgroups must neither load nor store, nor write LSE. Lengths that give
// 16+ blocks with padding at each head dim's usual tile (3100 rows: a
// 128-row shift at hd64's 192-row tiles, 64 rows at the 128-row tiles of
// 128 and 256; the varlen 2100 shifts 64 rows at 128-row tiles), dense (TMA
// stores, padded layout) and varlen (guarded stores; a short sequence first,
// so shifted padding rows fall in its rows or before the packed tensor),
// causal and with a window, with LSE. ShiftedMaskedBlocksShort covers the
// 64-row shift at 192-row tiles and softcap; VarlenManySequences' causal
// hd64 batch of 600 the shift on the padded walk.
TEST_F(Features, ShiftedMaskedBlocks) {
  const std::vector<int64_t> lengths_q = {100, 3100, 2100};
  const std::vector<int64_t> lengths_k = {150, 3100, 2300};
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool varlen : {false, true}) {
      for (bool window : {false, true}) {
        ++variant;
        FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 4, 2, next_seed());
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
        check_case(cfg);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Masked calls with more units than SMs: the CTAs walk every head's pairs,
// then every head's lone middle block (kernels/sm90/unit_map.h). 11 query
// blocks a head at each head dim's usual tile (2000 rows at hd64's 192-row
// tiles, 1400 at 128 rows: a middle block a head) and 3/8 as many heads as
// SMs: about 2.3 units an SM, and the middles start partway through a
// round. Causal and with a window, dense, with LSE.
TEST_F(Features, ManyUnitsMiddleBlocksLast) {
  int device = 0, sms = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
  const int64_t heads = std::max<int64_t>(2, (int64_t{sms} * 3 + 15) / 16 * 2);  // even, about 3/8 of the SMs
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool window : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, heads, 2, next_seed());
      cfg.causal = !window;
      if (window) {
        cfg.window_left = 500;
        cfg.window_right = 0;
      }
      cfg.with_lse = true;
      const int64_t rows = hd == 64 ? 2000 : 1400;
      cfg.seqlens_q = {rows};
      cfg.seqlens_k = {rows};
      check_case(cfg);
      if (HasFatalFailure()) return;
    }
  }
}

// Head dim 64's 192-row tiles shift at any block count: 2000 rows (11
// blocks) shift by 64 rows, 1000 (6 blocks) by 128. Dense and varlen,
// causal, a window, and a softcap on a causal mask, with LSE.
TEST_F(Features, ShiftedMaskedBlocksShort) {
  if (!head_dim_compiled(64)) GTEST_SKIP() << "head_dim 64 not compiled";
  int variant = 0;
  for (bool varlen : {false, true}) {
    for (int mode = 0; mode < 3; ++mode) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, 64, 4, 2, next_seed());
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
      } else {
        cfg.seqlens_q = {2000, 2000};
        cfg.seqlens_k = {2000, 2000};
        cfg.padded = true;
      }
      check_case(cfg);
      if (HasFatalFailure()) return;
      if (!varlen) {
        cfg.seqlens_q = {1000, 1000};
        cfg.seqlens_k = {1000, 1000};
        check_case(cfg);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// The lazy softmax max (kernel_traits.cuh, kLazyMax): every head_dim 128
// and 256 kernel (here hd128's 128x128, non-causal and causal, whose code
// the autotuner's 128x160 and 128x176 tiles share; hd256 128x64, unmasked
// and causal) keeps a stale max until some row of
// the warp outgrows it by 2^8 (OnlineSoftmax::update<true>), then rescales
// O. Inputs in [-8, 8) spread the scores so that most rows' max grows by
// far more than that after the first block visited: the late-rescale path
// runs for most rows. On sm90 the automatic picks must be these tiles, or
// this test would not cover them.
TEST_F(Features, LazyMaxRescalesLate) {
  struct Case {
    int64_t head_dim;
    bool causal;
    int64_t len_q, len_k;
    const char* kernel;  // the sm90 pick's name must start with this
  };
  int variant = 0;
  for (const Case& k : {Case{128, false, 300, 8300, "sm90 128x128"}, Case{128, true, 16400, 16400, "sm90 128x128"},
                        Case{128, false, 300, 2100, "sm90 128x128"}, Case{128, true, 2100, 2100, "sm90 128x128"},
                        Case{256, false, 300, 2100, "sm90 "}, Case{256, true, 2100, 2100, "sm90 128x64"}}) {
    if (!head_dim_compiled(k.head_dim)) continue;
    ++variant;
    FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, k.head_dim, 2, 1, next_seed());
    cfg.causal = k.causal;
    cfg.input_scale = 8.f;
    cfg.with_lse = true;
    const int64_t seqs = k.causal ? 1 : 2;
    cfg.seqlens_q.assign(static_cast<size_t>(seqs), k.len_q);
    cfg.seqlens_k.assign(static_cast<size_t>(seqs), k.len_k);
    {
      FeatureCase c(cfg, stream_);
      ASSERT_TRUE(c.init());
      AttentionParams p = c.params();
      p.backend = Backend::kSm90;
      if (sm90_runs(p)) {
        KernelChoice choice;
        ASSERT_TRUE(query_kernel_choice(c.params(), &choice).ok());
        EXPECT_EQ(std::string(choice.name).rfind(k.kernel, 0), 0u) << choice.name;
      }
    }
    check_case(cfg);
    if (HasFatalFailure()) return;
  }
  if (variant == 0) GTEST_SKIP() << "head_dim 128 and 256 not compiled";
}

// Many sequences: the Hopper kernel ranks up to a few hundred sequences by
// cost and walks only the tiles that exist (224 at head_dim 256, 384 at 128,
// 512 at 64); past that it walks the padded (batch, longest) numbering. 200
// sequences take the ranked walk at every head dim, 600 the padded one at
// every head dim, each once with and once without a causal mask. Lengths
// are random in [0, 300] (zeros and many ties in cost), keys independent of
// the queries.
TEST_F(Features, VarlenManySequences) {
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (int64_t batch : {200, 600}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 2, 1, next_seed());
      std::mt19937_64 rng(cfg.seed);
      std::uniform_int_distribution<int64_t> length(0, 300);
      for (int64_t b = 0; b < batch; ++b) {
        cfg.seqlens_q.push_back(length(rng));
        cfg.seqlens_k.push_back(length(rng));
      }
      cfg.causal = (batch == 200) == (hd == 128);
      cfg.varlen_q = true;
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 130;
      cfg.with_lse = variant % 3 != 0;
      check_case(cfg, {{Backend::kAuto, 0, false}});
      if (HasFatalFailure()) return;
    }
  }
  CaseConfig hopper;
  hopper.head_dim = 128;
  const std::vector<Backend> backends = backends_for(hopper);
  if (head_dim_compiled(128) && std::find(backends.begin(), backends.end(), Backend::kSm90) != backends.end()) {
    EXPECT_GT(sm90_runs_, 0) << "the premise: the Hopper kernel ran these";
  }
}

// ---------------------------------------------------------------- paged KV

// Pages of 16, 48, 64 and 256 keys assigned in a random order, ragged
// seqused_k (incl. 0 and 1), with dense Q (decode and short prefill) and with
// varlen Q (chunked prefill); block tables with spare entries (-1) and a
// batch stride past max_pages_per_seq.
TEST_F(Features, PagedKv) {
  const int64_t dense_rows[] = {1, 3, 16, 77};
  int variant = 0;
  for (int64_t page_size : {16, 48, 64, 256}) {
    for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      for (int64_t hd : {64, 128}) {
        if (!head_dim_compiled(hd)) continue;
        ++variant;
        FeatureConfig dense_q = make_config(dtype, hd, variant % 2 ? 8 : 16, variant % 2 ? 2 : 4, next_seed());
        dense_q.causal = variant % 2 == 0;
        dense_q.seqlens_k = rotated(variant);
        dense_q.seqlens_q = repeat(dense_rows[variant % 4], kNumLengths);
        dense_q.kv = KvLayout::kPaged;
        dense_q.use_seqused_k = true;
        dense_q.page_size = page_size;
        dense_q.spare_table_entries = variant % 3;
        dense_q.table_stride_pad = (variant % 2) * 5;
        dense_q.padded = variant % 3 == 0;
        check_case(dense_q);
        if (HasFatalFailure()) return;

        FeatureConfig chunked = make_config(dtype, hd, 8, 8, next_seed());
        chunked.causal = variant % 2 == 1;
        chunked.varlen_q = true;
        chunked.seqlens_q = rotated(variant + 2);
        chunked.seqlens_k = rotated(variant + 5);
        chunked.kv = KvLayout::kPaged;
        chunked.use_seqused_k = true;
        chunked.page_size = page_size;
        chunked.spare_pages = 7;
        chunked.with_lse = variant % 3 != 2;
        check_case(chunked);
        if (HasFatalFailure()) return;
      }
    }
  }
  // Without seqused_k every sequence has seqlen_k keys (not a multiple of the
  // page size here); pages in order, and shuffled.
  for (int64_t page_size : {16, 48, 64, 256}) {
    const int64_t hd = head_dim_compiled(128) ? 128 : 64;
    if (!head_dim_compiled(hd)) break;
    FeatureConfig cfg = make_config(page_size == 48 ? DType::kFloat16 : DType::kBFloat16, hd, 8, 2, next_seed());
    cfg.causal = page_size != 64;
    cfg.seqlens_q = repeat(40, 3);
    cfg.seqlens_k = repeat(300, 3);
    cfg.kv = KvLayout::kPaged;
    cfg.page_size = page_size;
    cfg.shuffle_pages = page_size != 16;
    check_case(cfg);
    if (HasFatalFailure()) return;
  }
  // seqlen_k passed as the allocation (max_pages_per_seq * page_size) rather
  // than the longest sequence: only seqused_k decides the keys.
  if (head_dim_compiled(128)) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 8, 2, next_seed());
    cfg.seqlens_q = repeat(4, 4);
    cfg.seqlens_k = {100, 0, 7, 250};
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 64;
    cfg.spare_table_entries = 2;
    cfg.seqlen_k_hint = (4 + 2) * 64;
    check_case(cfg);
    if (HasFatalFailure()) return;
  }
  if (head_dim_compiled(256)) {
    FeatureConfig cfg = make_config(DType::kBFloat16, 256, 8, 2, next_seed());
    cfg.causal = true;
    cfg.seqlens_q = repeat(16, kNumLengths);
    cfg.seqlens_k = rotated(3);
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 48;
    check_case(cfg);
  }
}

// ---------------------------------------------------------------- seqused_k on a dense cache

// A dense cache allocated for 1100 keys per sequence holding fewer (the rest
// NaN), for decode and prefill-shaped queries, MQA and GQA.
TEST_F(Features, DenseSequsedK) {
  const int64_t rows[] = {1, 33, 128};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (bool causal : {false, true}) {
        ++variant;
        FeatureConfig cfg = make_config(dtype, hd, variant % 2 ? 8 : 4, variant % 2 ? 1 : 2, next_seed());
        cfg.causal = causal;
        cfg.seqlens_q = repeat(rows[variant % 3], kNumLengths);
        cfg.seqlens_k = rotated(variant);
        cfg.kv = KvLayout::kDense;
        cfg.use_seqused_k = true;
        cfg.k_capacity = 1100;
        cfg.padded = variant % 3 == 1;
        check_case(cfg);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// seqused_k past the allocation is clamped to it (AttentionParams: "Values
// are clamped to that allocation").
TEST_F(Features, SequsedKIsClampedToTheAllocation) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kFloat16, hd, 4, 2, next_seed());
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
  for (const FlashRun& run : kAllBackends) {
    expect_run_matches(c, run, ref_o, ref_lse);
    if (HasFatalFailure()) return;
  }
  expect_sm90(c, c.params(), ref_o, ref_lse);  // seqused_k on a dense cache: the Hopper kernel clamps too
}

// ---------------------------------------------------------------- sliding window

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
// batches.
TEST_F(Features, SlidingWindow) {
  const std::pair<int64_t, int64_t> shapes[] = {{300, 1000}, {1000, 300}, {257, 257}};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (const Window& w : kWindows) {
        const auto [seqlen_q, seqlen_k] = shapes[variant++ % 3];
        FeatureConfig cfg = make_config(dtype, hd, 4, 2, next_seed());
        cfg.causal = w.causal;
        cfg.window_left = w.left;
        cfg.window_right = w.right;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        cfg.seqlens_k = repeat(seqlen_k, 2);
        cfg.padded = variant % 4 == 0;
        check_case(cfg);
        if (HasFatalFailure()) return;
      }
    }
  }
  int index = 0;
  for (const Window& w : kWindows) {
    ++index;
    const int64_t hd = index % 2 && head_dim_compiled(64) ? 64 : 128;
    if (!head_dim_compiled(hd)) continue;
    FeatureConfig cfg = make_config(index % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 8, 2, next_seed());
    cfg.causal = w.causal;
    cfg.window_left = w.left;
    cfg.window_right = w.right;
    cfg.varlen_q = true;
    cfg.seqlens_q = rotated(index);
    cfg.seqlens_k = rotated(index + 2);
    cfg.kv = KvLayout::kVarlen;
    check_case(cfg);
    if (HasFatalFailure()) return;
  }
  if (head_dim_compiled(256)) {
    FeatureConfig cfg = make_config(DType::kFloat16, 256, 4, 4, next_seed());
    cfg.window_left = 64;
    cfg.window_right = 64;
    cfg.seqlens_q = repeat(1000, 1);
    cfg.seqlens_k = repeat(300, 1);
    check_case(cfg);
    if (HasFatalFailure()) return;
  }
  // Windows several Hopper K/V blocks wide (64-176 keys) on long rows, so a
  // tile's visible blocks start past block 0, some are unmasked and the
  // mask cuts both edges; windows of fewer keys than a block; rows near the
  // top with no key (more queries than keys).
  const Window long_windows[] = {{false, 700, 0}, {false, 300, 300}, {true, 1000, 0}, {false, 33, 17}, {false, 0, 900}};
  const std::pair<int64_t, int64_t> long_shapes[] = {{2049, 2049}, {1500, 3000}, {2500, 1200}};
  variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (const Window& w : long_windows) {
      const auto [seqlen_q, seqlen_k] = long_shapes[variant % 3];
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kBFloat16 : DType::kFloat16, hd, 4, 2, next_seed());
      cfg.causal = w.causal;
      cfg.window_left = w.left;
      cfg.window_right = w.right;
      cfg.seqlens_q = repeat(seqlen_q, 1);
      cfg.seqlens_k = repeat(seqlen_k, 1);
      cfg.with_lse = variant % 3 != 1;
      check_case(cfg, {{Backend::kAuto}});
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_GT(rows_without_keys_, 0) << "the premise: some windowed rows see no key";
}

// ---------------------------------------------------------------- softcap

// Softcap 30 and 5 with inputs large enough that the cap changes the result
// (checked: the uncapped reference is far off), causal and not, on shapes
// with one query row, square, and more queries than keys; then with an
// explicit softmax_scale, and on a varlen batch.
TEST_F(Features, Softcap) {
  struct Cap {
    float softcap, input_scale;
  };
  const Cap caps[] = {{30.f, 5.f}, {5.f, 3.f}};
  const struct { int64_t q, k, batch; } shapes[] = {{200, 200, 2}, {1, 777, 3}, {333, 64, 2}};
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128}) {
      if (!head_dim_compiled(hd)) continue;
      for (const Cap& cap : caps) {
        for (bool causal : {false, true}) {
          const auto& shape = shapes[variant++ % 3];
          FeatureConfig cfg = make_config(dtype, hd, 4, 2, next_seed());
          cfg.causal = causal;
          cfg.softcap = cap.softcap;
          cfg.input_scale = cap.input_scale;
          cfg.seqlens_q = repeat(shape.q, static_cast<size_t>(shape.batch));
          cfg.seqlens_k = repeat(shape.k, static_cast<size_t>(shape.batch));
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
            EXPECT_GT(relative_l2(o_b, o_a), 5 * bounds_for(dtype).rel_l2) << "the cap hardly matters here";
          }
          check_case(cfg);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) return;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    FeatureConfig scaled = make_config(dtype, hd, 8, 8, next_seed());
    scaled.softcap = 10.f;
    scaled.softmax_scale = 0.25f;
    scaled.input_scale = 2.f;
    scaled.causal = dtype == DType::kBFloat16;
    scaled.seqlens_q = repeat(150, 2);
    scaled.seqlens_k = repeat(170, 2);
    check_case(scaled);
    if (HasFatalFailure()) return;

    FeatureConfig varlen = make_config(dtype, hd, 4, 1, next_seed());
    varlen.softcap = 30.f;
    varlen.input_scale = 4.f;
    varlen.causal = dtype == DType::kFloat16;
    varlen.varlen_q = true;
    varlen.seqlens_q = rotated(1);
    varlen.seqlens_k = rotated(4);
    varlen.kv = KvLayout::kVarlen;
    check_case(varlen);
    if (HasFatalFailure()) return;
  }
}

// ---------------------------------------------------------------- combinations

// Paged + window + softcap + GQA (decode and chunked prefill), and varlen
// + window + softcap, every head dim of 64, 128, 256 compiled.
TEST_F(Features, Combined) {
  int variant = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t hd : {64, 128, 256}) {
      if (!head_dim_compiled(hd)) continue;
      ++variant;
      FeatureConfig decode = make_config(dtype, hd, 32, 8, next_seed());
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
      check_case(decode);
      if (HasFatalFailure()) return;

      FeatureConfig chunked = make_config(dtype, hd, 8, 1, next_seed());
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
      check_case(chunked);
      if (HasFatalFailure()) return;

      if (hd == 256) continue;
      FeatureConfig varlen = make_config(dtype, hd, 12, 4, next_seed());
      varlen.varlen_q = true;
      varlen.seqlens_q = rotated(variant + 2);
      varlen.seqlens_k = rotated(variant + 6);
      varlen.kv = KvLayout::kVarlen;
      varlen.window_left = -1;
      varlen.window_right = 32;
      varlen.softcap = 30.f;
      varlen.input_scale = 4.f;
      varlen.padded = true;
      check_case(varlen);
      if (HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------- decode and split-KV

// Decode shapes: seqlen_q 1, 2, 4, 16; GQA 32/8 and MHA 8/8; 1, 17, 1000,
// 5000 keys (two sequences, the second shorter), over a dense cache with
// and without seqused_k and paged caches; each with num_splits 1, 3, 7 and
// automatic (with a workspace from attention_workspace_size) on kDecode,
// kAuto with and without a workspace, and kSm80 without splits. Split calls
// must be bitwise reproducible.
TEST_F(Features, DecodeShapes) {
  int variant = 0;
  for (int64_t seqlen_q : {1, 2, 4, 16}) {
    for (auto [heads_q, heads_kv] : {std::pair<int64_t, int64_t>{32, 8}, {8, 8}}) {
      for (int64_t keys : {1, 17, 1000, 5000}) {
        ++variant;
        const DType dtype = variant % 2 ? DType::kBFloat16 : DType::kFloat16;
        const int64_t hd = (variant / 2) % 2 ? 128 : 64;
        if (!head_dim_compiled(hd)) continue;
        FeatureConfig cfg = make_config(dtype, hd, heads_q, heads_kv, next_seed());
        cfg.causal = seqlen_q > 1 && (variant / 4) % 2 == 1;
        cfg.seqlens_q = repeat(seqlen_q, 2);
        const int64_t shorter = std::max<int64_t>(1, keys * 3 / 5);
        cfg.seqlens_k = {keys, shorter};
        cfg.with_lse = variant % 5 != 0;
        switch (variant % 5) {
          case 0:
            cfg.kv = KvLayout::kDense;
            cfg.seqlens_k = {keys, keys};
            break;
          case 1:
            cfg.kv = KvLayout::kDense;
            cfg.use_seqused_k = true;
            cfg.k_capacity = keys + 13;
            break;
          default:
            cfg.kv = KvLayout::kPaged;
            cfg.use_seqused_k = true;
            cfg.page_size = variant % 5 == 2 ? 16 : variant % 5 == 3 ? 64 : 256;
            cfg.padded = variant % 3 == 0;
            break;
        }
        check_case(cfg, kDecodeRuns);
        if (HasFatalFailure()) return;
      }
    }
  }
  if (head_dim_compiled(256)) {
    for (int64_t seqlen_q : {1, 16}) {
      FeatureConfig cfg = make_config(DType::kBFloat16, 256, 32, 8, next_seed());
      cfg.seqlens_q = repeat(seqlen_q, 2);
      cfg.seqlens_k = {5000, 2100};
      cfg.kv = KvLayout::kPaged;
      cfg.use_seqused_k = true;
      cfg.page_size = 64;
      cfg.causal = seqlen_q > 1;
      check_case(cfg, kDecodeRuns);
      if (HasFatalFailure()) return;
    }
  }
}

// Split results do not depend on what the workspace held before (NaN, then
// zeros) and are bitwise reproducible, up to the 128-split maximum and with
// more splits requested than there are key blocks.
TEST_F(Features, SplitKvIsDeterministic) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    FeatureConfig cfg = make_config(dtype, hd, 32, 8, next_seed());
    cfg.seqlens_q = repeat(4, 3);
    cfg.seqlens_k = {4097, 77, 2500};
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 64;
    cfg.causal = true;
    cfg.softcap = dtype == DType::kFloat16 ? 30.f : 0.f;
    SCOPED_TRACE(cfg.name());
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    std::vector<double> ref_o, ref_lse;
    // FLASH_TEST_FEATURE_REF=cpu checks against the float64 CPU reference
    // instead of cuBLAS (slow; for investigating a failure).
    const char* which = std::getenv("FLASH_TEST_FEATURE_REF");
    const bool cpu = which != nullptr && std::string(which) == "cpu";
    ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse, cpu ? SequenceReference::kCpu : SequenceReference::kCublas));
    for (int32_t splits : {2, 7, 64, 128}) {
      SCOPED_TRACE("num_splits " + std::to_string(splits));
      AttentionParams p = c.params();
      p.backend = Backend::kDecode;
      p.num_splits = splits;
      size_t bytes = 0;
      ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
      EXPECT_GT(bytes, 0u) << "4097 keys split " << splits << " ways need a workspace";
      DeviceBuffer workspace;
      ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
      p.workspace = workspace.ptr;
      p.workspace_bytes = bytes;

      std::vector<uint16_t> o1, o2;
      std::vector<float> lse1, lse2;
      Status s = c.run(p);  // the workspace poisoned with NaN first
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_TRUE(c.read_raw(&o1, &lse1));
      std::vector<float> o, lse;
      ASSERT_TRUE(c.read_output(&o, &lse));
      EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));

      s = c.run(p, /*workspace_fill=*/0);  // O and LSE poisoned again, the workspace zeros
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_TRUE(c.read_raw(&o2, &lse2));
      EXPECT_TRUE(bitwise_equal(o1, o2)) << "O depends on the workspace's previous contents or is not deterministic";
      EXPECT_TRUE(bitwise_equal(lse1, lse2)) << "LSE differs between two identical calls";
    }
  }
}

// The workspace contract: attention_workspace_size is 0 without splits and
// nonzero for an explicit split of many keys; a split with a missing or
// too-small workspace is rejected (kInvalidArgument) and writes nothing, as
// is a misaligned one; num_splits 0 without a workspace does not split.
TEST_F(Features, SplitWorkspaceChecks) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kBFloat16, hd, 8, 8, next_seed());
  cfg.seqlens_q = repeat(1, 1);
  cfg.seqlens_k = repeat(5000, 1);
  cfg.kv = KvLayout::kDense;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));

  AttentionParams p = c.params();
  p.backend = Backend::kDecode;
  size_t bytes = 12345;
  p.num_splits = 1;
  ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
  EXPECT_EQ(bytes, 0u) << "num_splits 1 never splits";

  p.num_splits = 7;
  ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
  ASSERT_GT(bytes, 0u) << "7 splits of 5000 keys need a workspace";

  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "null workspace for a requested split";
  EXPECT_TRUE(c.outputs_untouched());

  DeviceBuffer workspace;
  ASSERT_EQ(workspace.allocate(bytes + 512), cudaSuccess);
  p.workspace = workspace.ptr;
  p.workspace_bytes = bytes - 1;
  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "workspace one byte short";
  EXPECT_TRUE(c.outputs_untouched());

  p.workspace = static_cast<char*>(workspace.ptr) + 16;
  p.workspace_bytes = bytes;
  EXPECT_EQ(c.run(p).code, StatusCode::kInvalidArgument) << "workspace not 256-byte aligned";
  EXPECT_TRUE(c.outputs_untouched());

  p.workspace = workspace.ptr;
  p.workspace_bytes = bytes;
  Status s = c.run(p);
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));

  // num_splits 0 and no workspace: flash does not split, and succeeds.
  for (Backend backend : {Backend::kDecode, Backend::kAuto}) {
    SCOPED_TRACE(backend_name(backend));
    AttentionParams q = c.params();
    q.backend = backend;
    q.num_splits = 0;
    s = c.run(q);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_TRUE(c.read_output(&o, &lse));
    EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));
    size_t auto_bytes = 0;
    ASSERT_TRUE(attention_workspace_size(q, &auto_bytes).ok());
    // Informational: whether the automatic choice splits this call (one
    // sequence, 8 heads, 5000 keys: few (batch, head) pairs for the GPU).
    std::printf("[flash tests] %s, num_splits 0: attention_workspace_size = %zu bytes\n", backend_name(backend),
                auto_bytes);
  }

  // Bad arguments to attention_workspace_size itself.
  p = c.params();
  p.num_splits = -1;
  EXPECT_EQ(attention_workspace_size(p, &bytes).code, StatusCode::kInvalidArgument);
  p.num_splits = 7;
  EXPECT_EQ(attention_workspace_size(p, nullptr).code, StatusCode::kInvalidArgument);
}

// kSm80 takes every feature except num_splits > 1: such a call is either
// refused (kUnsupported, nothing written) or computed correctly.
TEST_F(Features, Sm80WithSplitsIsRightOrUnsupported) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  FeatureConfig cfg = make_config(DType::kFloat16, hd, 8, 2, next_seed());
  cfg.seqlens_q = repeat(2, 2);
  cfg.seqlens_k = {3000, 1200};
  cfg.kv = KvLayout::kPaged;
  cfg.use_seqused_k = true;
  cfg.page_size = 64;
  SCOPED_TRACE(cfg.name());
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.reference(cublas_, &ref_o, &ref_lse));
  AttentionParams p = c.params();
  p.backend = Backend::kSm80;
  p.num_splits = 5;
  size_t bytes = 0;
  const Status query = attention_workspace_size(p, &bytes);
  EXPECT_TRUE(query.ok() || query.code == StatusCode::kUnsupported) << query.message;
  if (!query.ok()) {
    // The documented size of a requested split's workspace (validate()
    // checks it before the backend is considered).
    bytes = size_t{5} * static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q * (p.head_dim + 1)) * 4;
  }
  DeviceBuffer workspace;
  if (bytes > 0) {
    ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
    p.workspace = workspace.ptr;
    p.workspace_bytes = bytes;
  }
  const Status s = c.run(p);
  if (s.code == StatusCode::kUnsupported) {
    EXPECT_TRUE(c.outputs_untouched());
    return;
  }
  EXPECT_FALSE(query.code == StatusCode::kUnsupported) << "attention_workspace_size refused what attention_forward ran";
  ASSERT_TRUE(s.ok()) << s.message;
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse));
}

// ---------------------------------------------------------------- kSm90 and the edges

// What Backend::kSm90 lacks: a paged cache, seqused_k, and
// varlen Q or K without total_q / total_k. Each alone gets
// kUnsupported and nothing is written (on any GPU: elsewhere kSm90 is
// unsupported anyway), and kAuto never picks it for them.
TEST_F(Features, Sm90RefusesWhatItLacks) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  auto base = [&] {
    FeatureConfig cfg = make_config(DType::kBFloat16, hd, 8, 2, next_seed());
    cfg.seqlens_q = repeat(128, 2);
    cfg.seqlens_k = repeat(256, 2);
    return cfg;
  };
  // A config and how its params are edited (e.g. the totals taken away).
  struct Refused {
    FeatureConfig cfg;
    bool drop_total_q = false, drop_total_k = false;
  };
  std::vector<Refused> refused;
  FeatureConfig cfg = base();
  cfg.varlen_q = true;
  refused.push_back({cfg, true, false});  // varlen Q without total_q
  cfg = base();
  cfg.kv = KvLayout::kVarlen;
  refused.push_back({cfg, false, true});  // varlen K without total_k
  cfg = base();
  cfg.varlen_q = true;
  cfg.kv = KvLayout::kVarlen;
  refused.push_back({cfg, true, true});   // neither
  refused.push_back({cfg, false, true});  // total_q alone
  refused.push_back({cfg, true, false});  // total_k alone
  cfg = base();
  cfg.kv = KvLayout::kPaged;
  cfg.page_size = 64;
  refused.push_back({cfg});
  cfg.use_seqused_k = true;
  refused.push_back({cfg});
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.cfg.name() + (r.drop_total_q ? ", total_q not given" : "") +
                 (r.drop_total_k ? ", total_k not given" : ""));
    FeatureCase c(r.cfg, stream_);
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
}

// A varlen call without total_q / total_k (the fields left at 0, as callers
// written before they existed do) is still computed correctly by kAuto and
// kSm80, and kSm90 refuses it (kUnsupported, nothing written). The same
// call with the totals given runs on kSm90 where the device has it, and
// kAuto picks the Hopper kernel for it there (seqlen_q > 16).
TEST_F(Features, VarlenWithoutTotals) {
  int variant = 0;
  for (int64_t hd : {64, 128, 256}) {
    if (!head_dim_compiled(hd)) continue;
    for (bool causal : {false, true}) {
      ++variant;
      FeatureConfig cfg = make_config(variant % 2 ? DType::kFloat16 : DType::kBFloat16, hd, 8, 2, next_seed());
      cfg.causal = causal;
      cfg.varlen_q = true;
      cfg.seqlens_q = tile_rotated(variant);
      cfg.seqlens_k = tile_rotated(variant + 4);
      cfg.kv = KvLayout::kVarlen;
      cfg.tail_rows = 16;
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
  }
}

// Batches whose sequences are all empty: no query rows (nothing written),
// or no keys (every row O = 0, LSE = -inf), for every KV layout.
TEST_F(Features, EmptySequences) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  if (!head_dim_compiled(hd)) GTEST_SKIP() << "neither head_dim 64 nor 128 compiled";
  {
    FeatureConfig cfg = make_config(DType::kFloat16, hd, 4, 2, next_seed());
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
    {
      // total_q is 0 here, which reads as "not given": kSm90 may refuse
      // (kUnsupported); either way it writes nothing.
      SCOPED_TRACE("backend sm90");
      const Status s = c.run(Backend::kSm90);
      EXPECT_TRUE(s.ok() || s.code == StatusCode::kUnsupported) << s.message;
      EXPECT_TRUE(c.outputs_untouched());
    }
  }
  for (KvLayout kv : {KvLayout::kDense, KvLayout::kVarlen, KvLayout::kPaged}) {
    for (bool causal : {false, true}) {
      FeatureConfig cfg = make_config(DType::kBFloat16, hd, 4, 2, next_seed());
      cfg.causal = causal;
      cfg.varlen_q = kv == KvLayout::kVarlen;
      cfg.seqlens_q = repeat(kv == KvLayout::kPaged ? 3 : 70, 2);
      cfg.seqlens_k = {0, 0};
      cfg.kv = kv;
      cfg.use_seqused_k = kv != KvLayout::kVarlen;
      cfg.k_capacity = kv == KvLayout::kDense ? 64 : 0;
      check_case(cfg, {{Backend::kAuto}, {Backend::kSm80}, {Backend::kDecode}, {Backend::kDecode, 0, true}});
      if (HasFatalFailure()) return;
    }
  }
}

// ---------------------------------------------------------------- the per-sequence reference itself

// Runs the dense cuBLAS reference on `p` (no varlen/paging), O as float
// [batch, seqlen_q, heads_q, head_dim] and the LSE [batch, heads_q, seqlen_q].
::testing::AssertionResult dense_reference(AttentionParams p, cublasHandle_t handle, cudaStream_t stream,
                                           std::vector<double>* o, std::vector<double>* lse) {
  const size_t o_count = static_cast<size_t>(p.batch * p.seqlen_q * p.heads_q * p.head_dim);
  const size_t lse_count = static_cast<size_t>(p.batch * p.heads_q * p.seqlen_q);
  DeviceBuffer o16, o32, l, workspace;
  if (o16.allocate(o_count * 2) != cudaSuccess || o32.allocate(o_count * 4) != cudaSuccess ||
      l.allocate(lse_count * 4) != cudaSuccess) {
    return ::testing::AssertionFailure() << "cudaMalloc failed";
  }
  p.o = o16.ptr;
  p.lse = static_cast<float*>(l.ptr);
  p.o_head_stride = p.head_dim;
  p.o_seq_stride = p.heads_q * p.head_dim;
  p.o_batch_stride = p.seqlen_q * p.o_seq_stride;
  const size_t bytes = ref::standard_attention_workspace_bytes(p);
  if (workspace.allocate(bytes) != cudaSuccess) return ::testing::AssertionFailure() << "cudaMalloc failed";
  const Status s = ref::standard_attention(p, static_cast<float*>(o32.ptr), workspace.ptr, bytes, handle, stream);
  if (!s.ok()) return ::testing::AssertionFailure() << "standard_attention: " << s.message;
  std::vector<float> host(o_count);
  if (cudaStreamSynchronize(stream) != cudaSuccess ||
      cudaMemcpy(host.data(), o32.ptr, o_count * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return ::testing::AssertionFailure() << "reading the reference failed";
  }
  o->assign(host.begin(), host.end());
  host.resize(lse_count);
  if (cudaMemcpy(host.data(), l.ptr, lse_count * 4, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return ::testing::AssertionFailure() << "reading the reference LSE failed";
  }
  lse->assign(host.begin(), host.end());
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult nearly_equal(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // also -inf == -inf
    if (!(std::abs(a[i] - b[i]) <= 1e-5 * std::max(1.0, std::abs(b[i])))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

class FeatureReference : public GpuTest {};

// When every sequence has the same length, packed Q/K/V, a paged cache
// whose pages are in order, and a dense cache whose seqused_k is the
// capacity are all views of one dense batch: the per-sequence reference
// must agree with the dense reference run on that view.
TEST_F(FeatureReference, MatchesDenseViews) {
  const int64_t hd = head_dim_compiled(128) ? 128 : 64;
  for (KvLayout kv : {KvLayout::kVarlen, KvLayout::kPaged, KvLayout::kDense}) {
    FeatureConfig cfg =
        make_config(DType::kFloat16, hd, 6, 2, case_seed(kFeatureSeedBase + 90000 + static_cast<int>(kv)));
    cfg.causal = true;
    cfg.window_left = 40;
    cfg.softcap = 5.f;
    cfg.input_scale = 2.f;
    cfg.varlen_q = kv == KvLayout::kVarlen;
    cfg.seqlens_q = repeat(50, 3);
    cfg.seqlens_k = repeat(96, 3);  // six pages of 16
    cfg.kv = kv;
    cfg.use_seqused_k = kv == KvLayout::kDense;
    cfg.page_size = 16;
    cfg.shuffle_pages = false;
    cfg.spare_pages = 0;
    SCOPED_TRACE(cfg.name());
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    std::vector<double> o, lse, dense_o, dense_lse;
    ASSERT_TRUE(c.reference(cublas_, &o, &lse));

    AttentionParams dense = c.params();
    dense.cu_seqlens_q = dense.cu_seqlens_k = dense.seqused_k = dense.block_table = nullptr;
    dense.seqlen_q = 50;
    dense.seqlen_k = 96;
    dense.q_batch_stride = 50 * dense.q_seq_stride;
    if (kv != KvLayout::kDense) dense.k_batch_stride = dense.v_batch_stride = 96 * dense.k_seq_stride;
    ASSERT_TRUE(dense_reference(dense, cublas_, stream_, &dense_o, &dense_lse));
    EXPECT_TRUE(nearly_equal(o, dense_o));
    if (kv == KvLayout::kVarlen) {
      // The varlen LSE is [heads_q, total_q]; the dense one [batch, heads_q, seqlen_q].
      std::vector<double> reordered(lse.size());
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t h = 0; h < 6; ++h) {
          for (int64_t i = 0; i < 50; ++i) reordered[(b * 6 + h) * 50 + i] = lse[h * 150 + b * 50 + i];
        }
      }
      lse = reordered;
    }
    EXPECT_TRUE(nearly_equal(lse, dense_lse));
  }
}

// The cuBLAS and float64 per-sequence references agree on a ragged paged
// batch with a window and a softcap (and rows that see no key).
TEST_F(FeatureReference, CublasMatchesFloat64) {
  const int64_t hd = head_dim_compiled(64) ? 64 : 128;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    FeatureConfig cfg = make_config(dtype, hd, 4, 2, case_seed(kFeatureSeedBase + 91000 + static_cast<int>(dtype)));
    cfg.varlen_q = true;
    cfg.seqlens_q = {0, 1, 17, 65, 40};
    cfg.seqlens_k = {5, 0, 33, 17, 130};
    cfg.kv = KvLayout::kPaged;
    cfg.use_seqused_k = true;
    cfg.page_size = 48;
    cfg.window_left = 20;
    cfg.window_right = 3;
    cfg.softcap = 5.f;
    cfg.input_scale = 3.f;
    cfg.padded = true;
    SCOPED_TRACE(cfg.name());
    FeatureCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    EXPECT_GT(c.rows_seeing_no_key(), 0);
    std::vector<double> o, lse, cpu_o, cpu_lse;
    ASSERT_TRUE(c.reference(cublas_, &o, &lse));
    ASSERT_TRUE(c.reference(cublas_, &cpu_o, &cpu_lse, SequenceReference::kCpu));
    const std::vector<float> of(o.begin(), o.end()), lsef(lse.begin(), lse.end());
    EXPECT_TRUE(check_attention(c.check_params(), of, lsef, cpu_o, cpu_lse));
  }
}

}  // namespace
}  // namespace flash::test

namespace flash::test {
namespace {

// Small cases of each new kernel path for compute-sanitizer: a split-KV
// decode over a shuffled paged cache (the decode kernel's shared-memory
// merge and the combine kernel), a causal varlen prefill with totals (the
// Hopper kernel's varlen tiles and guarded stores), a window with a softcap.
TEST_F(Features, SanitizerNewPathsAgree) {
  if (!head_dim_compiled(64) || !head_dim_compiled(128)) GTEST_SKIP() << "head_dim 64 or 128 not compiled";
  {
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 8, 2, case_seed(9001));
    cfg.seqlens_q = repeat(1, 3);
    cfg.seqlens_k = {17, 300, 1000};
    cfg.kv = KvLayout::kPaged;
    cfg.page_size = 16;
    cfg.use_seqused_k = true;
    check_against_sm80(cfg, {{Backend::kDecode, 3, true}, {Backend::kDecode, 1}});
    if (HasFatalFailure()) return;
  }
  {
    FeatureConfig cfg = make_config(DType::kFloat16, 64, 4, 2, case_seed(9002));
    cfg.varlen_q = true;
    cfg.kv = KvLayout::kVarlen;
    cfg.seqlens_q = {0, 17, 129};
    cfg.seqlens_k = {5, 129, 200};
    cfg.causal = true;
    cfg.tail_rows = 8;
    check_against_sm80(cfg, {{Backend::kDecode, 0}});
    if (HasFatalFailure()) return;
  }
  {
    // Window + softcap: on sm_90 kSm90 runs the Hopper kernel's softcap variant.
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 4, 4, case_seed(9003));
    cfg.seqlens_q = repeat(65, 1);
    cfg.seqlens_k = repeat(300, 1);
    cfg.window_left = 32;
    cfg.window_right = 0;
    cfg.softcap = 10.f;
    check_against_sm80(cfg, {{Backend::kDecode, 0}});
    if (HasFatalFailure()) return;
  }
  {
    // A left window without softcap: on sm_90 kAuto and kSm90 run the
    // Hopper kernel's left-window variant (visible blocks past block 0).
    FeatureConfig cfg = make_config(DType::kBFloat16, 128, 4, 2, case_seed(9004));
    cfg.seqlens_q = repeat(700, 1);
    cfg.seqlens_k = repeat(900, 1);
    cfg.window_left = 200;
    cfg.window_right = 30;
    check_against_sm80(cfg, {{Backend::kAuto, 0}});
  }
}

}  // namespace
}  // namespace flash::test
