// The per-sequence reference the feature tests check against
// (FeatureCase::reference): it agrees with the dense reference on dense
// views of one batch, and the cuBLAS and float64 versions agree.
#include <algorithm>
#include <cmath>
#include <vector>

#include "feature_test.h"
#include "reference.h"

namespace flash::test {
namespace {

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
