// The feature tests' shared rows and fixtures. See feature_test.h.
#include "feature_test.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "reference.h"
#include "src/dispatch.h"

namespace flash::test {
namespace {

template <size_t kN>
std::vector<int64_t> rotate(const int64_t (&lengths)[kN], int shift) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < kN; ++i) v.push_back(lengths[(i + static_cast<size_t>(shift)) % kN]);
  return v;
}

// A number in a test name: "m1" for -1.
std::string number(int64_t value) {
  return value < 0 ? "m" + std::to_string(-value) : std::to_string(value);
}

}  // namespace

std::vector<int64_t> rotated(int shift) { return rotate(kLengths, shift); }
std::vector<int64_t> tile_rotated(int shift) { return rotate(kTileLengths, shift); }

std::vector<int64_t> repeat(int64_t value, size_t count) {
  return std::vector<int64_t>(count, value);
}

FeatureConfig make_config(DType dtype, int64_t head_dim, int64_t heads_q, int64_t heads_kv, uint64_t seed_index) {
  FeatureConfig cfg;
  cfg.dtype = dtype;
  cfg.head_dim = head_dim;
  cfg.heads_q = heads_q;
  cfg.heads_kv = heads_kv;
  cfg.seed = seed_index;
  return cfg;
}

std::string FlashRun::name() const {
  return std::string(backend_name(backend)) + ", num_splits " + std::to_string(num_splits) +
         (workspace ? ", workspace from attention_workspace_size" : ", no workspace");
}

std::vector<FlashRun> all_backends() {
  return {{Backend::kAuto}, {Backend::kSm80}, {Backend::kDecode}};
}

std::vector<FlashRun> decode_runs() {
  return {
      {Backend::kDecode, 1}, {Backend::kDecode, 3, true}, {Backend::kDecode, 7, true}, {Backend::kDecode, 0, true},
      {Backend::kAuto, 0},   {Backend::kAuto, 0, true},   {Backend::kAuto, 7, true},   {Backend::kSm80, 1},
  };
}

std::vector<FlashRun> prefill_split_runs(bool decode) {
  std::vector<FlashRun> runs = all_backends();
  runs.push_back({Backend::kAuto, 0, true});
  runs.push_back({Backend::kSm80, 3, true});
  if (decode) runs.push_back({Backend::kDecode, 3, true});
  return runs;
}

void PrintTo(const FeatureRow& row, std::ostream* os) {
  *os << row.name;
}

FeatureRow& FeatureTable::add(const std::string& role, const FeatureConfig& cfg, std::vector<FlashRun> runs) {
  std::string name = role + "_" + (cfg.dtype == DType::kFloat16 ? "fp16" : "bf16") + "_hd" + number(cfg.head_dim);
  if (cfg.head_dim_v != 0) name += "v" + number(cfg.head_dim_v);
  if (cfg.causal) name += "_causal";
  if (cfg.window_left != -1 || cfg.window_right != -1) {
    name += "_window" + number(cfg.window_left) + "_" + number(cfg.window_right);
  }
  if (cfg.softcap != 0.f) name += "_softcap" + number(static_cast<int64_t>(cfg.softcap));
  std::set<std::string> taken;
  for (const FeatureRow& row : rows_) taken.insert(row.name);
  std::string unique = name;
  for (int n = 2; taken.count(unique) != 0; ++n) unique = name + "_" + std::to_string(n);
  rows_.push_back({unique, cfg, std::move(runs)});
  return rows_.back();
}

int64_t rows_seeing_no_key(const FeatureConfig& cfg) {
  int64_t rows = 0;
  for (size_t b = 0; b < cfg.seqlens_q.size(); ++b) {
    const int64_t len_q = cfg.seqlens_q[b], len_k = cfg.seqlens_k[b];
    for (int64_t i = 0; i < len_q; ++i) {
      const ref::KeyRange r = ref::visible_keys(i, len_q, len_k, cfg.causal, cfg.window_left, cfg.window_right);
      if (r.first > r.last) rows += cfg.heads_q;
    }
  }
  return rows;
}

// Whether `p` may run Q K^T on the e4m3 tensor cores (kFp8CacheQkE4m3,
// kernels/sm90/kernel_traits.cuh): a bf16 Q against an fp8 cache on the
// Hopper kernel of head dim 128 or 256 (the next compiled one at or above
// the wider of head_dim and head_dim_v). kAuto may pick that kernel;
// kDecode and kSm80 never do.
bool may_run_e4m3_qk(const AttentionParams& p) {
  if (p.kv_dtype != KvDType::kFloat8E4M3 || p.dtype != DType::kBFloat16) return false;
  if (p.backend == Backend::kDecode || p.backend == Backend::kSm80 || !sm90_runs(p)) return false;
  const int64_t widest = std::max(p.head_dim, p.head_dim_v);
  for (int64_t d : {64, 96, 128, 192, 256}) {
    if (d >= widest && head_dim_compiled(d)) return d % 128 == 0;
  }
  return false;
}

bool bitwise_equal(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0;
}

double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// ---------------------------------------------------------------- FeatureFixture

FeatureFixture::Totals FeatureFixture::totals_;

::testing::AssertionResult FeatureFixture::params_for(const FeatureCase& c, const FlashRun& run,
                                                      DeviceBuffer* workspace, AttentionParams* p) {
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

::testing::AssertionResult FeatureFixture::reference(FeatureCase& c, std::vector<double>* o,
                                                     std::vector<double>* lse) {
  const char* which = std::getenv("FLASH_TEST_FEATURE_REF");
  const bool cpu = which != nullptr && std::string(which) == "cpu";
  return c.reference(cublas_, o, lse, cpu ? SequenceReference::kCpu : SequenceReference::kCublas);
}

void FeatureFixture::expect_run_matches(FeatureCase& c, const FlashRun& run, const std::vector<double>& ref_o,
                                        const std::vector<double>& ref_lse) {
  SCOPED_TRACE(run.name());
  DeviceBuffer workspace;
  AttentionParams p;
  ASSERT_TRUE(params_for(c, run, &workspace, &p));
  expect_params_match(c, p, ref_o, ref_lse);
}

void FeatureFixture::expect_launch_matches(FeatureCase& c, const detail::Plan& plan, const detail::Candidate& candidate,
                                           const AttentionParams& p, const std::vector<double>& ref_o,
                                           const std::vector<double>& ref_lse) {
  ASSERT_EQ(c.poison_outputs(), cudaSuccess);
  ASSERT_EQ(detail::launch(plan, candidate, p, c.stream()), cudaSuccess);
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  Errors errors;
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse, &errors));
  EXPECT_TRUE(c.padding_untouched());
  totals_.worst.add(errors);
}

void FeatureFixture::expect_params_match(FeatureCase& c, const AttentionParams& p, const std::vector<double>& ref_o,
                                         const std::vector<double>& ref_lse) {
  const Status s = c.run(p);
  if (!s.ok()) {
    ADD_FAILURE() << "attention_forward failed: " << s.message;
    return;
  }
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  Errors errors;
  EXPECT_TRUE(check_attention(c.check_params(), o, lse, ref_o, ref_lse, &errors,
                              may_run_e4m3_qk(p) ? &c.e4m3_qk_allowance() : nullptr));
  EXPECT_TRUE(c.padding_untouched());
  totals_.worst.add(errors);
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

void FeatureFixture::expect_sm90(FeatureCase& c, const AttentionParams& params, const std::vector<double>& ref_o,
                                 const std::vector<double>& ref_lse) {
  SCOPED_TRACE("backend sm90");
  AttentionParams p = params;
  p.backend = Backend::kSm90;
  if (sm90_runs(p)) {
    expect_params_match(c, p, ref_o, ref_lse);
    ++totals_.sm90_runs;
    return;
  }
  const Status s = c.run(p);
  EXPECT_EQ(s.code, StatusCode::kUnsupported) << s.message;
  EXPECT_TRUE(c.outputs_untouched());
}

void FeatureFixture::expect_sm90_splits(FeatureCase& c, int32_t num_splits, const std::vector<double>& ref_o,
                                        const std::vector<double>& ref_lse) {
  AttentionParams p = c.params();
  p.backend = Backend::kSm90;
  p.num_splits = num_splits;
  if (!sm90_runs(p)) return;
  SCOPED_TRACE("backend sm90, num_splits " + std::to_string(num_splits));
  DeviceBuffer workspace;
  size_t bytes = 0;
  ASSERT_TRUE(attention_workspace_size(p, &bytes).ok());
  ASSERT_EQ(workspace.allocate(bytes), cudaSuccess);
  p.workspace = workspace.ptr;
  p.workspace_bytes = bytes;
  expect_params_match(c, p, ref_o, ref_lse);
}

void FeatureFixture::check_case(const FeatureConfig& cfg, const std::vector<FlashRun>& runs,
                                const MoreChecks& more) {
  SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed));
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(reference(c, &ref_o, &ref_lse));
  totals_.rows_without_keys += c.rows_seeing_no_key();
  for (const FlashRun& run : runs) {
    expect_run_matches(c, run, ref_o, ref_lse);
    if (HasFatalFailure()) return;
  }
  expect_sm90(c, c.params(), ref_o, ref_lse);
  if (HasFatalFailure()) return;
  if (more) {
    more(c, ref_o, ref_lse);
    if (HasFatalFailure()) return;
  }
  ++totals_.cases;
}

void FeatureFixture::check_against(const FeatureConfig& cfg, const std::vector<FlashRun>& runs, Backend reference) {
  SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed) + ", reference: " + backend_name(reference));
  FeatureCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  AttentionParams p = c.params();
  p.backend = reference;
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

void FeatureFixture::TearDownTestSuite() {
  if (totals_.cases > 0) {
    std::printf("[flash tests] %d feature cases (%d run on sm90), %" PRId64
                " (row, head) pairs seeing no key; worst rel_l2 %.3g, "
                "max_abs/max|ref| %.3g, lse %.3g",
                totals_.cases, totals_.sm90_runs, totals_.rows_without_keys, totals_.worst.worst.rel_l2,
                totals_.worst.worst.max_abs_rel(), totals_.worst.worst.max_lse);
    // Calls that may run Q K^T on the e4m3 tensor cores: their largest LSE
    // error as a fraction of FeatureCase::e4m3_qk_allowance.
    if (totals_.worst.worst.max_of_allowance > 0) {
      std::printf(", e4m3 Q K^T lse / allowance %.3g", totals_.worst.worst.max_of_allowance);
    }
    std::printf("\n");
  }
  totals_ = Totals();
}

// ---------------------------------------------------------------- FeatureTest

FeatureConfig FeatureTest::row_config() const {
  FeatureConfig cfg = GetParam().cfg;
  cfg.seed = case_seed(cfg.seed);
  return cfg;
}

void FeatureTest::check_row() {
  check_case(row_config(), GetParam().runs);
}

void FeatureTest::check_row_without_absent_sm90() {
  const FeatureConfig cfg = row_config();
  CaseConfig hd;
  hd.head_dim = cfg.head_dim;
  const std::vector<Backend> backends = backends_for(hd);
  const bool hopper = std::find(backends.begin(), backends.end(), Backend::kSm90) != backends.end();
  std::vector<FlashRun> runs;
  for (const FlashRun& run : GetParam().runs) {
    if (run.backend != Backend::kSm90 || hopper) runs.push_back(run);
  }
  check_case(cfg, runs);
}

}  // namespace flash::test
