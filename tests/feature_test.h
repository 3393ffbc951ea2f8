// What the feature tests (tests/test_features_*_gpu.cpp) share: the runs of
// flash a case goes through, the ragged lengths the tables draw from, a
// table row (a named FeatureConfig and its runs), and the fixtures that run
// a row on every backend that should take it against the per-sequence
// reference (tests/feature_case.h).
//
// Every case runs on kAuto, kSm80 and kDecode (kDecode takes any seqlen_q,
// so prefill cases run there too), and on kSm90 where the case uses only
// what the Hopper kernel supports (varlen with total_q / total_k given,
// seqused_k on a dense cache, causal, windows, softcap) and the device has
// it; everywhere else kSm90 must return kUnsupported and write nothing.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "feature_case.h"
#include "gpu_case.h"
#include "src/plan.h"

namespace flash::test {

constexpr uint64_t kFeatureSeedBase = uint64_t{1} << 28;  // apart from the other tests' seeds

// The ragged lengths the varlen/paged tables draw from: empty, one, around
// the 64-row tiles, and long.
constexpr int64_t kLengths[] = {0, 1, 17, 63, 64, 65, 300, 1000};
constexpr size_t kNumLengths = sizeof(kLengths) / sizeof(kLengths[0]);
// kLengths rotated left by `shift`.
std::vector<int64_t> rotated(int shift);

// Ragged lengths around the Hopper kernel's 128- and 192-row query tiles and
// its K/V blocks: empty, one, short, one row either side of 128, long, and
// one row past 2048, so tiles end inside sequences and sequences end inside
// tiles.
constexpr int64_t kTileLengths[] = {0, 1, 17, 127, 128, 129, 1000, 2049};
constexpr size_t kNumTileLengths = sizeof(kTileLengths) / sizeof(kTileLengths[0]);
std::vector<int64_t> tile_rotated(int shift);

// `count` copies of `value` (dense Q or K: every sequence the same length).
std::vector<int64_t> repeat(int64_t value, size_t count);

// A feature config with the usual fields. `seed_index` goes to cfg.seed;
// a table row's test replaces it by case_seed(seed_index) (row_config()).
FeatureConfig make_config(DType dtype, int64_t head_dim, int64_t heads_q, int64_t heads_kv, uint64_t seed_index);

// One flash call on a case: backend, num_splits, and whether to pass a
// workspace of attention_workspace_size() bytes.
struct FlashRun {
  Backend backend = Backend::kAuto;
  int32_t num_splits = 0;
  bool workspace = false;

  std::string name() const;
};

// Each backend that takes every feature, with flash choosing (without a
// workspace, so never splitting).
std::vector<FlashRun> all_backends();
// Split-KV runs of a decode-shaped case, plus the backends without splits.
std::vector<FlashRun> decode_runs();
// The split runs of a prefill case besides all_backends(): flash's choice
// with a workspace (a few query tiles: it splits), three splits asked of
// the sm80 kernel and, with `decode`, of the decode kernel.
std::vector<FlashRun> prefill_split_runs(bool decode);

// One mask of a feature table's dense rows: causal or not, a window
// (-1: unbounded), a softcap (0: none), named in the row's role.
struct MaskCase {
  const char* name;
  bool causal;
  int64_t left, right;
  float softcap;
  void apply(FeatureConfig* cfg) const {
    cfg->causal = causal;
    cfg->window_left = left;
    cfg->window_right = right;
    cfg->softcap = softcap;
  }
};

// One row of a feature table: the case, its name in the test's name, and
// the runs it goes through (then kSm90, see FeatureFixture::expect_sm90).
struct FeatureRow {
  std::string name;  // letters, digits and '_': e.g. "both_fp16_hd64_causal"
  FeatureConfig cfg;  // cfg.seed is the seed index for case_seed()
  std::vector<FlashRun> runs;
};
// gtest prints a parameter with this (e.g. in --gtest_list_tests).
void PrintTo(const FeatureRow& row, std::ostream* os);

// A table under construction: add() names each row `role` plus the config's
// dtype, head dim and masking, made unique with a suffix where needed.
class FeatureTable {
 public:
  FeatureRow& add(const std::string& role, const FeatureConfig& cfg, std::vector<FlashRun> runs = all_backends());
  const std::vector<FeatureRow>& rows() const { return rows_; }

 private:
  std::vector<FeatureRow> rows_;
};

// The name generator of INSTANTIATE_TEST_SUITE_P: the row's name.
struct RowName {
  std::string operator()(const ::testing::TestParamInfo<FeatureRow>& info) const { return info.param.name; }
};

// Rows (query row x head) of `cfg` that see no key, from the config alone.
int64_t rows_seeing_no_key(const FeatureConfig& cfg);

bool bitwise_equal(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b);
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b);
// Relative L2 distance of two outputs (for premises: a feature must change the result).
double relative_l2(const std::vector<double>& a, const std::vector<double>& b);

// Runs feature cases against their reference on each backend. The cases a
// suite checks are summed and printed once, after the suite.
class FeatureFixture : public GpuTest {
 protected:
  // The case's params for `run`, with a workspace from
  // attention_workspace_size() when asked (allocated into `workspace`).
  ::testing::AssertionResult params_for(const FeatureCase& c, const FlashRun& run, DeviceBuffer* workspace,
                                        AttentionParams* p);
  // The reference of `c`: cuBLAS, or the float64 CPU reference when
  // FLASH_TEST_FEATURE_REF=cpu (slow; for investigating a failure).
  ::testing::AssertionResult reference(FeatureCase& c, std::vector<double>* o, std::vector<double>* lse);

  // Runs `c` with `run` and checks O and the LSE against the reference and
  // that O's padding was not written. A call that may split (workspace
  // given, or num_splits > 1) runs twice and must give the same bits.
  void expect_run_matches(FeatureCase& c, const FlashRun& run, const std::vector<double>& ref_o,
                          const std::vector<double>& ref_lse);
  // The same for the call `p` (the case's params, edited).
  void expect_params_match(FeatureCase& c, const AttentionParams& p, const std::vector<double>& ref_o,
                           const std::vector<double>& ref_lse);
  // Launches `candidate` of `plan` for the call `p` itself (detail::launch,
  // after poisoning O and the LSE) and checks O, the LSE and O's padding
  // against the reference, once: for configurations a plan made for
  // another device would run.
  void expect_launch_matches(FeatureCase& c, const detail::Plan& plan, const detail::Candidate& candidate,
                             const AttentionParams& p, const std::vector<double>& ref_o,
                             const std::vector<double>& ref_lse);
  // Backend::kSm90 on `c`: where sm90_runs(p) it must match the reference
  // like any backend; elsewhere (a feature it lacks, varlen without the
  // totals, no Hopper kernel for this device or head dim) it must return
  // kUnsupported and write nothing.
  void expect_sm90(FeatureCase& c, const AttentionParams& params, const std::vector<double>& ref_o,
                   const std::vector<double>& ref_lse);
  // Backend::kSm90 asked for `num_splits` splits on `c`, with a workspace
  // of attention_workspace_size() bytes, where sm90_runs(): it must match
  // the reference (the Hopper kernel splits dense calls too).
  void expect_sm90_splits(FeatureCase& c, int32_t num_splits, const std::vector<double>& ref_o,
                          const std::vector<double>& ref_lse);
  // More checks on a case, given its reference O and LSE.
  using MoreChecks = std::function<void(FeatureCase&, const std::vector<double>&, const std::vector<double>&)>;
  // Builds `cfg`, computes its reference, runs every entry of `runs`, then
  // Backend::kSm90 (see expect_sm90), then `more` if given.
  void check_case(const FeatureConfig& cfg, const std::vector<FlashRun>& runs, const MoreChecks& more = nullptr);
  // For compute-sanitizer (scripts/sanitize.sh runs the *Sanitizer* tests,
  // racecheck only those): no cuBLAS kernel runs, so the reference is
  // flash's own `reference` backend (the sm80 kernel; the decode kernel for
  // an fp8 cache, which the sm80 kernel refuses) and every other run, then
  // Backend::kSm90 (see expect_sm90), must agree with it.
  void check_against(const FeatureConfig& cfg, const std::vector<FlashRun>& runs,
                     Backend reference = Backend::kSm80);

  static void TearDownTestSuite();

  struct Totals {
    WorstErrors worst;
    int cases = 0;
    int sm90_runs = 0;  // kSm90 runs checked against the reference
    int64_t rows_without_keys = 0;
  };
  static Totals totals_;
};

// A table-driven feature test: GetParam() is the row.
class FeatureTest : public FeatureFixture, public ::testing::WithParamInterface<FeatureRow> {
 protected:
  // The row's config, its seed index turned into this run's case seed.
  FeatureConfig row_config() const;
  // check_case() on the row.
  void check_row();
  // check_row() with the row's explicit Backend::kSm90 runs dropped where
  // the device or the build has no Hopper kernel for its head dim.
  void check_row_without_absent_sm90();
};

}  // namespace flash::test
