// flash::attention_forward beyond the matrix: the float64 reference, large
// scores, determinism, empty work, the softmax scale, the optional LSE,
// broadcast inputs, backend selection, the default stream, and a small set
// for compute-sanitizer (scripts/gpu-check.sh runs *Sanitizer*).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "device_tensor.h"
#include "gpu_case.h"

namespace flash::test {
namespace {

std::vector<int64_t> compiled_head_dims() {
  std::vector<int64_t> dims;
  for (int64_t d : {32, 64, 96, 128, 192, 256}) {
    if (head_dim_compiled(d)) dims.push_back(d);
  }
  return dims;
}

// 128 when compiled, else any compiled head dim.
int64_t some_head_dim() {
  const std::vector<int64_t> dims = compiled_head_dims();
  for (int64_t d : dims) {
    if (d == 128) return d;
  }
  return dims.empty() ? 0 : dims.front();
}

// The backends of backends_for() plus kAuto.
std::vector<Backend> all_backends(const CaseConfig& cfg) {
  std::vector<Backend> backends = backends_for(cfg);
  backends.push_back(Backend::kAuto);
  return backends;
}

CaseConfig make_case(DType dtype, int64_t head_dim, bool causal, int64_t seqlen_q, int64_t seqlen_k,
                     int64_t heads_q, int64_t heads_kv, Layout layout, uint64_t index) {
  CaseConfig cfg;
  cfg.dtype = dtype;
  cfg.head_dim = head_dim;
  cfg.causal = causal;
  cfg.seqlen_q = seqlen_q;
  cfg.seqlen_k = seqlen_k;
  cfg.heads_q = heads_q;
  cfg.heads_kv = heads_kv;
  cfg.layout = layout;
  cfg.seed = case_seed(index);
  return cfg;
}

constexpr uint64_t kEdgeSeedBase = 1u << 20;  // keeps these seeds apart from the matrix's

class ForwardEdge : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    head_dim_ = some_head_dim();
    if (head_dim_ == 0) GTEST_SKIP() << "no head dim compiled";
  }
  int64_t head_dim_ = 0;
};

TEST_F(ForwardEdge, MatchesFloat64Reference) {
  uint64_t index = kEdgeSeedBase;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : compiled_head_dims()) {
      const CaseConfig cases[] = {
          make_case(dtype, d, true, 17, 129, 8, 2, Layout::kPadded, ++index),
          make_case(dtype, d, true, 129, 17, 2, 2, Layout::kBHND, ++index),
          make_case(dtype, d, false, 65, 65, 4, 1, Layout::kPacked, ++index),
          make_case(dtype, d, false, 1, 33, 8, 1, Layout::kBNHD, ++index),
      };
      for (const CaseConfig& cfg : cases) {
        expect_matches_reference(cfg, cublas_, stream_, nullptr, Reference::kCpu);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Inputs uniform in [-8, 8) with softmax_scale 1: raw scores have a standard
// deviation of 64/3 * sqrt(head_dim) (~240 at head_dim 128), so the row
// maxima are in the hundreds and exp() would overflow without the max.
TEST_F(ForwardEdge, LargeScores) {
  uint64_t index = kEdgeSeedBase + 100;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (bool causal : {false, true}) {
      for (auto [seqlen_q, seqlen_k] : {std::pair<int64_t, int64_t>{300, 300}, {77, 1030}}) {
        CaseConfig cfg = make_case(dtype, head_dim_, causal, seqlen_q, seqlen_k, 4, 2, Layout::kBNHD, ++index);
        cfg.input_scale = 8.f;
        cfg.softmax_scale = 1.f;
        {
          // The premise: the reference's LSE (about the row max) is in the hundreds.
          AttentionCase c(cfg, stream_);
          ASSERT_TRUE(c.init());
          std::vector<double> ref_o, ref_lse;
          ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
          double max_lse = 0;
          for (double x : ref_lse) max_lse = std::max(max_lse, std::isfinite(x) ? x : 0.0);
          EXPECT_GT(max_lse, 100.0) << cfg.name();
        }
        expect_matches_reference(cfg, cublas_, stream_);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(ForwardEdge, DeterministicBitwise) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CaseConfig cfg = make_case(dtype, head_dim_, true, 333, 1037, 8, 2, Layout::kBNHD, kEdgeSeedBase + 200);
    cfg.batch = 2;
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    for (Backend backend : all_backends(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend));
      std::vector<uint16_t> o1, o2;
      std::vector<float> lse1, lse2;
      const Status s1 = c.run_flash(backend);
      ASSERT_TRUE(s1.ok()) << s1.message;
      ASSERT_TRUE(c.read_raw(&o1, &lse1));
      const Status s2 = c.run_flash(backend);
      ASSERT_TRUE(s2.ok()) << s2.message;
      ASSERT_TRUE(c.read_raw(&o2, &lse2));
      ASSERT_EQ(o1.size(), o2.size());
      EXPECT_EQ(std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(o1[0])), 0) << "O differs between runs";
      EXPECT_EQ(std::memcmp(lse1.data(), lse2.data(), lse1.size() * sizeof(lse1[0])), 0)
          << "LSE differs between runs";
    }
  }
}

TEST_F(ForwardEdge, NoKeysGivesZerosAndNegInfLse) {
  for (bool causal : {false, true}) {
    CaseConfig cfg = make_case(DType::kBFloat16, head_dim_, causal, 70, 0, 4, 2, Layout::kBNHD, kEdgeSeedBase + 300);
    cfg.batch = 2;
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    for (Backend backend : all_backends(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend));
      const Status s = c.run_flash(backend);
      if (backend == Backend::kSm90 && s.code == StatusCode::kUnsupported) continue;  // documented: use kAuto
      ASSERT_TRUE(s.ok()) << s.message;
      std::vector<float> o, lse;
      ASSERT_TRUE(c.read_output(&o, &lse));
      int64_t nonzero = 0, not_neg_inf = 0;
      for (float x : o) nonzero += x != 0.f;
      for (float x : lse) not_neg_inf += x != -INFINITY;
      EXPECT_EQ(nonzero, 0) << "O must be all zeros when seqlen_k == 0";
      EXPECT_EQ(not_neg_inf, 0) << "LSE must be all -inf when seqlen_k == 0";
    }
  }
}

TEST_F(ForwardEdge, EmptyWorkWritesNothing) {
  for (int which = 0; which < 2; ++which) {
    CaseConfig cfg = make_case(DType::kFloat16, head_dim_, true, 50, 60, 4, 2, Layout::kBNHD, kEdgeSeedBase + 400);
    (which == 0 ? cfg.batch : cfg.seqlen_q) = 0;
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    for (Backend backend : all_backends(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend));
      const Status s = c.run_flash(backend);
      EXPECT_TRUE(s.ok()) << s.message;
      EXPECT_TRUE(c.outputs_untouched());
    }
  }
}

TEST_F(ForwardEdge, RejectedCallWritesNothing) {
  const CaseConfig cfg =
      make_case(DType::kBFloat16, head_dim_, false, 50, 60, 4, 2, Layout::kBNHD, kEdgeSeedBase + 500);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  AttentionParams p = c.params();
  p.head_dim = 84;
  EXPECT_EQ(c.run_flash_with(p).code, StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.outputs_untouched());
  p = c.params();
  p.o = const_cast<void*>(p.q);  // output aliasing an input
  EXPECT_EQ(c.run_flash_with(p).code, StatusCode::kInvalidArgument);
  EXPECT_TRUE(c.outputs_untouched());
}

TEST_F(ForwardEdge, DefaultSoftmaxScaleIsOneOverSqrtHeadDim) {
  for (int64_t d : compiled_head_dims()) {
    const CaseConfig cfg = make_case(DType::kFloat16, d, true, 100, 150, 4, 2, Layout::kBNHD, kEdgeSeedBase + 600 + d);
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    for (Backend backend : backends_for(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend));
      AttentionParams p = c.params();
      p.backend = backend;
      std::vector<uint16_t> o_default, o_explicit;
      std::vector<float> lse_default, lse_explicit;
      Status s = c.run_flash_with(p);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_TRUE(c.read_raw(&o_default, &lse_default));
      p.softmax_scale = 1.f / std::sqrt(static_cast<float>(d));
      s = c.run_flash_with(p);
      ASSERT_TRUE(s.ok()) << s.message;
      ASSERT_TRUE(c.read_raw(&o_explicit, &lse_explicit));
      EXPECT_TRUE(o_default == o_explicit) << "softmax_scale 0 and 1/sqrt(head_dim) give different O";
      EXPECT_EQ(std::memcmp(lse_default.data(), lse_explicit.data(), lse_default.size() * 4), 0);
    }
  }
}

TEST_F(ForwardEdge, ExplicitSoftmaxScale) {
  uint64_t index = kEdgeSeedBase + 700;
  for (float scale : {0.03f, 0.3f, 2.f}) {
    CaseConfig cfg = make_case(DType::kBFloat16, head_dim_, true, 200, 260, 8, 2, Layout::kBHND, ++index);
    cfg.softmax_scale = scale;
    expect_matches_reference(cfg, cublas_, stream_);
    if (HasFatalFailure()) return;
  }
}

// The largest scale and softcap validate() accepts give finite outputs on
// every backend: the folded exponent never exceeds 0, so no probability
// overflows, however far the scaled scores are from the kernel's accurate
// range (there a row may degenerate to its largest keys, or to zeros).
TEST_F(ForwardEdge, LargestAcceptedScaleStaysFinite) {
  CaseConfig cfg = make_case(DType::kFloat16, head_dim_, true, 100, 130, 4, 2, Layout::kBNHD, kEdgeSeedBase + 850);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  for (const float softcap : {0.f, 1e6f}) {
    for (Backend backend : backends_for(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend) + ", softcap " + std::to_string(softcap));
      AttentionParams p = c.params();
      p.backend = backend;
      p.softmax_scale = 1e24f;
      p.softcap = softcap;
      ASSERT_TRUE(validate(p).ok()) << validate(p).message;
      const Status s = c.run_flash_with(p);
      ASSERT_TRUE(s.ok()) << s.message;
      std::vector<float> o, lse;
      ASSERT_TRUE(c.read_output(&o, &lse));
      size_t non_finite = 0;
      for (float x : o) non_finite += std::isfinite(x) ? 0 : 1;
      for (float x : lse) non_finite += (std::isfinite(x) || x == -INFINITY) ? 0 : 1;
      EXPECT_EQ(non_finite, 0u);
    }
  }
}

// A negative scale must be rejected, naming softmax_scale (validate() does
// so today), or else give the right result.
TEST_F(ForwardEdge, NegativeSoftmaxScaleIsRightOrRejected) {
  CaseConfig cfg = make_case(DType::kFloat16, head_dim_, true, 100, 130, 4, 2, Layout::kBNHD, kEdgeSeedBase + 800);
  cfg.softmax_scale = -0.1f;
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  const Status s = c.run_flash(Backend::kAuto);
  if (s.code == StatusCode::kInvalidArgument) {
    EXPECT_NE(std::string(s.message).find("softmax_scale"), std::string::npos) << s.message;
    return;
  }
  expect_matches_reference(cfg, cublas_, stream_);
}

TEST_F(ForwardEdge, LseIsOptional) {
  for (bool causal : {false, true}) {
    CaseConfig cfg =
        make_case(DType::kBFloat16, head_dim_, causal, 190, 70, 8, 2, Layout::kPadded, kEdgeSeedBase + 900);
    CaseConfig no_lse = cfg;
    no_lse.with_lse = false;
    expect_matches_reference(no_lse, cublas_, stream_);
    if (HasFatalFailure()) return;
    // Same inputs (same seed): O must not depend on whether the LSE is written.
    AttentionCase with(cfg, stream_), without(no_lse, stream_);
    ASSERT_TRUE(with.init());
    ASSERT_TRUE(without.init());
    for (Backend backend : backends_for(cfg)) {
      SCOPED_TRACE(cfg.name() + ", " + backend_name(backend));
      std::vector<uint16_t> o1, o2;
      std::vector<float> lse1, lse2;
      ASSERT_TRUE(with.run_flash(backend).ok());
      ASSERT_TRUE(with.read_raw(&o1, &lse1));
      ASSERT_TRUE(without.run_flash(backend).ok());
      ASSERT_TRUE(without.read_raw(&o2, &lse2));
      EXPECT_TRUE(o1 == o2) << "O differs with and without the LSE";
    }
  }
}

TEST_F(ForwardEdge, BroadcastKeysAndValues) {
  uint64_t index = kEdgeSeedBase + 1000;
  for (bool causal : {false, true}) {
    CaseConfig cfg = make_case(DType::kFloat16, head_dim_, causal, 150, 200, 8, 2, Layout::kBroadcastKV, ++index);
    cfg.batch = 2;
    expect_matches_reference(cfg, cublas_, stream_);
    if (HasFatalFailure()) return;
  }
}

// kAuto must give bitwise what the backend it picks gives: sm90 where the
// build and the GPU have it for the head dim, sm80 otherwise.
TEST_F(ForwardEdge, AutoMatchesTheBackendItPicks) {
  for (int64_t d : compiled_head_dims()) {
    const CaseConfig cfg =
        make_case(DType::kBFloat16, d, true, 130, 300, 4, 2, Layout::kBNHD, kEdgeSeedBase + 1100 + d);
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    const Backend expected = backends_for(cfg).back();
    SCOPED_TRACE(cfg.name() + ", expecting " + backend_name(expected));
    std::vector<uint16_t> o_auto, o_expected;
    std::vector<float> lse_auto, lse_expected;
    ASSERT_TRUE(c.run_flash(Backend::kAuto).ok());
    ASSERT_TRUE(c.read_raw(&o_auto, &lse_auto));
    ASSERT_TRUE(c.run_flash(expected).ok());
    ASSERT_TRUE(c.read_raw(&o_expected, &lse_expected));
    EXPECT_TRUE(o_auto == o_expected) << "kAuto did not pick " << backend_name(expected);
  }
}

TEST_F(ForwardEdge, DefaultStream) {
  const CaseConfig cfg =
      make_case(DType::kBFloat16, head_dim_, true, 100, 100, 4, 4, Layout::kBNHD, kEdgeSeedBase + 1200);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  std::vector<double> ref_o, ref_lse;
  ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
  const Status s = c.run_flash_with(c.params(), /*default_stream=*/true);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> o, lse;
  ASSERT_TRUE(c.read_output(&o, &lse));
  EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse));
}

// Small but ragged, masked and GQA, every compiled head dim: few enough for
// compute-sanitizer's memcheck and racecheck.
class Sanitizer : public GpuTest {};

TEST_F(Sanitizer, SmallRaggedCases) {
  uint64_t index = kEdgeSeedBase + 1300;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t d : compiled_head_dims()) {
      for (bool causal : {false, true}) {
        const CaseConfig cfg = make_case(dtype, d, causal, causal ? 130 : 70, causal ? 70 : 130, 4, 2,
                                         Layout::kPadded, ++index);
        expect_matches_reference(cfg, cublas_, stream_);
        if (HasFatalFailure()) return;
      }
    }
  }
}

// Enough tiles that every CTA of the persistent sm90 grid walks several, so
// the checkers see shared memory (Q, the O staging buffer, the K/V rings)
// reused across tiles, and causal walks that include empty tiles
// (seqlen_q > seqlen_k leaves the top rows with no key). The reference is
// the sm80 kernel (itself checked against cuBLAS by the matrix): cuBLAS's own
// sm90 GEMMs trip racecheck ("failed to handle a hardware exception",
// 2026-11-29), so this test, which exists to run under the sanitizers,
// keeps cuBLAS out.
TEST_F(Sanitizer, ManyTilesPerCta) {
  uint64_t index = kEdgeSeedBase + 1400;
  int ran = 0;
  for (int64_t d : {64, 128, 256}) {
    if (!head_dim_compiled(d)) continue;
    for (bool causal : {false, true}) {
      CaseConfig cfg = make_case(DType::kBFloat16, d, causal, causal ? 640 : 384, causal ? 300 : 384, 32, 8,
                                 Layout::kBNHD, ++index);
      cfg.batch = 3;
      const std::vector<Backend> backends = backends_for(cfg);
      if (std::find(backends.begin(), backends.end(), Backend::kSm90) == backends.end()) continue;
      ++ran;
      SCOPED_TRACE(cfg.name());
      AttentionCase c(cfg, stream_);
      ASSERT_TRUE(c.init());
      ASSERT_TRUE(c.run_flash(Backend::kSm80).ok());
      std::vector<float> o80, lse80;
      ASSERT_TRUE(c.read_output(&o80, &lse80));
      const Status s = c.run_flash(Backend::kSm90);
      ASSERT_TRUE(s.ok()) << s.message;
      std::vector<float> o90, lse90;
      ASSERT_TRUE(c.read_output(&o90, &lse90));
      const std::vector<double> ref_o(o80.begin(), o80.end());
      const std::vector<double> ref_lse(lse80.begin(), lse80.end());
      Errors errors;
      EXPECT_TRUE(check_attention(c.params(), o90, lse90, ref_o, ref_lse, &errors));
      EXPECT_TRUE(c.padding_untouched());
    }
  }
  if (ran == 0) GTEST_SKIP() << "no sm90 backend on this device/build";
}

}  // namespace
}  // namespace flash::test
