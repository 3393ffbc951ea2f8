// The references themselves, since every other GPU test trusts them:
// standard_attention (cuBLAS) against the float64 CPU attention for every
// layout and for sliding windows and softcap, its dtype output, its argument
// handling, and fill_uniform.
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "device_tensor.h"
#include "gpu_case.h"
#include "reference.h"

namespace flash::test {
namespace {

constexpr uint64_t kReferenceSeedBase = 1u << 24;

class StandardAttention : public GpuTest {};

TEST_F(StandardAttention, MatchesFloat64) {
  uint64_t index = kReferenceSeedBase;
  const Layout layouts[] = {Layout::kBNHD, Layout::kBHND, Layout::kPacked, Layout::kPadded, Layout::kBroadcastKV};
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (Layout layout : layouts) {
      for (bool causal : {false, true}) {
        for (auto [seqlen_q, seqlen_k, head_dim] : {std::tuple<int64_t, int64_t, int64_t>{33, 77, 64}, {77, 33, 96},
                                                   {40, 40, 32}, {1, 40, 128}}) {
          CaseConfig cfg;
          cfg.dtype = dtype;
          cfg.head_dim = head_dim;
          cfg.causal = causal;
          cfg.batch = 2;
          cfg.seqlen_q = seqlen_q;
          cfg.seqlen_k = seqlen_k;
          cfg.heads_q = 6;
          cfg.heads_kv = 2;
          cfg.layout = layout;
          cfg.seed = case_seed(++index);
          SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed));
          AttentionCase c(cfg, stream_);
          ASSERT_TRUE(c.init());
          std::vector<double> ref_o, ref_lse, cpu_o, cpu_lse;
          ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
          ASSERT_TRUE(c.run_cpu_reference(&cpu_o, &cpu_lse));
          const std::vector<float> o(ref_o.begin(), ref_o.end());
          const std::vector<float> lse(ref_lse.begin(), ref_lse.end());
          EXPECT_TRUE(check_attention(c.params(), o, lse, cpu_o, cpu_lse));
        }
      }
    }
  }
}

// Sliding windows (incl. rows that see no key) and softcap, each alone and
// together, on shapes with more keys than queries, fewer, equal, and one row.
TEST_F(StandardAttention, WindowAndSoftcapMatchFloat64) {
  struct Window {
    bool causal;
    int64_t left, right;
  };
  const Window windows[] = {{false, -1, -1}, {false, 8, 0}, {false, 0, 0},  {false, 5, 5},
                            {false, -1, 3},  {false, 2, -1}, {true, 4, -1}, {true, -1, 0}};
  const Layout layouts[] = {Layout::kBNHD, Layout::kBHND, Layout::kPadded};
  uint64_t index = kReferenceSeedBase + 3000;
  int64_t rows_without_keys = 0;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (float softcap : {0.f, 5.f}) {
      for (const Window& w : windows) {
        if (softcap == 0.f && w.left == -1 && w.right == -1 && !w.causal) continue;  // MatchesFloat64's job
        for (auto [seqlen_q, seqlen_k] : {std::pair<int64_t, int64_t>{33, 77}, {77, 33}, {40, 40}, {1, 40}}) {
          CaseConfig cfg;
          cfg.dtype = dtype;
          cfg.head_dim = 64;
          cfg.causal = w.causal;
          cfg.window_left = w.left;
          cfg.window_right = w.right;
          cfg.softcap = softcap;
          cfg.input_scale = softcap > 0.f ? 3.f : 1.f;
          cfg.batch = 2;
          cfg.seqlen_q = seqlen_q;
          cfg.seqlen_k = seqlen_k;
          cfg.heads_q = 4;
          cfg.heads_kv = 2;
          cfg.layout = layouts[index % 3];
          cfg.seed = case_seed(++index);
          SCOPED_TRACE(cfg.name() + ", seed " + std::to_string(cfg.seed));
          AttentionCase c(cfg, stream_);
          ASSERT_TRUE(c.init());
          std::vector<double> ref_o, ref_lse, cpu_o, cpu_lse;
          ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));
          ASSERT_TRUE(c.run_cpu_reference(&cpu_o, &cpu_lse));
          const std::vector<float> o(ref_o.begin(), ref_o.end());
          const std::vector<float> lse(ref_lse.begin(), ref_lse.end());
          Errors errors;
          EXPECT_TRUE(check_attention(c.params(), o, lse, cpu_o, cpu_lse, &errors));
          rows_without_keys += errors.empty_rows;
        }
      }
    }
  }
  EXPECT_GT(rows_without_keys, 0) << "the premise: some windowed rows see no key";
}

// The references are dense-only: varlen and paged calls are refused.
TEST_F(StandardAttention, RejectsVarlenAndPagedCalls) {
  CaseConfig cfg;
  cfg.seqlen_q = 40;
  cfg.seqlen_k = 50;
  cfg.seed = case_seed(kReferenceSeedBase + 2500);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  const size_t needed = ref::standard_attention_workspace_bytes(c.params());
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, needed), cudaSuccess);
  int32_t* lengths = nullptr;  // valid device memory, though the references must not read it
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&lengths), 64), cudaSuccess);
  ASSERT_EQ(cudaMemset(lengths, 0, 64), cudaSuccess);
  for (int field = 0; field < 4; ++field) {
    AttentionParams p = c.params();
    (field == 0 ? p.cu_seqlens_q : field == 1 ? p.cu_seqlens_k : field == 2 ? p.seqused_k : p.block_table) = lengths;
    if (field == 3) {
      p.page_size = 16;
      p.max_pages_per_seq = 4;
      p.block_table_batch_stride = 4;
      p.num_pages = 4;
    }
    SCOPED_TRACE("field " + std::to_string(field));
    const Status s = ref::standard_attention(p, nullptr, workspace, needed, cublas_, stream_);
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
    EXPECT_NE(std::string(s.message).find("dense-only"), std::string::npos) << s.message;
  }
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  cudaFree(lengths);
  cudaFree(workspace);
}

// The dtype output is the float32 one, rounded once; written with O's
// (padded) strides and nowhere else.
TEST_F(StandardAttention, DtypeOutputIsTheRoundedFloat32Output) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    CaseConfig cfg;
    cfg.dtype = dtype;
    cfg.head_dim = 64;
    cfg.causal = true;
    cfg.batch = 2;
    cfg.seqlen_q = 90;
    cfg.seqlen_k = 50;
    cfg.heads_q = 4;
    cfg.heads_kv = 2;
    cfg.layout = Layout::kPadded;
    cfg.seed = case_seed(kReferenceSeedBase + 1000 + static_cast<int>(dtype));
    SCOPED_TRACE(cfg.name());
    AttentionCase c(cfg, stream_);
    ASSERT_TRUE(c.init());
    // Poison O through a rejected flash call's path, then let the reference write it.
    AttentionParams rejected = c.params();
    rejected.head_dim = 84;
    ASSERT_FALSE(c.run_flash_with(rejected).ok());

    const size_t count = static_cast<size_t>(cfg.batch * cfg.seqlen_q * cfg.heads_q * cfg.head_dim);
    float* o_f32 = nullptr;
    void* workspace = nullptr;
    const size_t workspace_bytes = ref::standard_attention_workspace_bytes(c.params());
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&o_f32), count * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&workspace, workspace_bytes), cudaSuccess);
    const Status s = ref::standard_attention(c.params(), o_f32, workspace, workspace_bytes, cublas_, stream_);
    EXPECT_TRUE(s.ok()) << s.message;
    std::vector<float> o, lse, o32(count);
    EXPECT_TRUE(c.read_output(&o, &lse));
    EXPECT_EQ(cudaMemcpy(o32.data(), o_f32, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(o_f32);
    cudaFree(workspace);
    ASSERT_TRUE(s.ok());

    // Round to nearest: |fl(x) - x| <= u |x|, u = 2^-8 (bf16) or 2^-11 (fp16);
    // a little slack for the two GEMMs' own accumulation orders.
    const double u = dtype == DType::kBFloat16 ? 1.0 / 256 : 1.0 / 2048;
    int64_t bad = 0, rows_without_keys = 0;
    for (size_t x = 0; x < count; ++x) {
      const double tolerance = u * std::abs(o32[x]) * 1.01 + 1e-6;
      bad += !(std::abs(static_cast<double>(o[x]) - o32[x]) <= tolerance);
    }
    for (float l : lse) rows_without_keys += l == -INFINITY;
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(rows_without_keys, cfg.batch * cfg.heads_q * (cfg.seqlen_q - cfg.seqlen_k));
    EXPECT_TRUE(c.padding_untouched());
  }
}

TEST_F(StandardAttention, RejectsBadArguments) {
  CaseConfig cfg;
  cfg.seqlen_q = 40;
  cfg.seqlen_k = 50;
  cfg.heads_q = 2;
  cfg.heads_kv = 2;
  cfg.seed = case_seed(kReferenceSeedBase + 2000);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  const size_t needed = ref::standard_attention_workspace_bytes(c.params());
  ASSERT_GT(needed, 0u);
  void* workspace = nullptr;
  ASSERT_EQ(cudaMalloc(&workspace, needed), cudaSuccess);
  Status s = ref::standard_attention(c.params(), nullptr, workspace, needed - 1, cublas_, stream_);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
  EXPECT_NE(std::string(s.message).find("workspace"), std::string::npos) << s.message;
  AttentionParams p = c.params();
  p.head_dim = 84;
  s = ref::standard_attention(p, nullptr, workspace, needed, cublas_, stream_);
  EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
  s = ref::standard_attention(c.params(), nullptr, workspace, needed, cublas_, stream_);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  cudaFree(workspace);
}

class FillUniform : public GpuTest {};

TEST_F(FillUniform, IsFreshAndNeverZero) {
  constexpr size_t kCount = size_t{1} << 16;
  constexpr float kScale = 3.f;
  void* buffer = nullptr;
  ASSERT_EQ(cudaMalloc(&buffer, kCount * 2), cudaSuccess);
  auto fill = [&](DType dtype, uint64_t seed) {
    std::vector<uint16_t> host(kCount);
    EXPECT_EQ(ref::fill_uniform(buffer, dtype, kCount, seed, kScale, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), buffer, kCount * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  };
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    const std::vector<uint16_t> a = fill(dtype, 1), b = fill(dtype, 1), c = fill(dtype, 2);
    EXPECT_TRUE(a == b) << "the same seed must give the same values";
    size_t same = 0, zeros = 0, out_of_range = 0;
    double sum = 0, sum_abs = 0;
    for (size_t i = 0; i < kCount; ++i) {
      const float x = ref::to_float(a[i], dtype);
      same += a[i] == c[i];
      zeros += x == 0.f;
      out_of_range += !(std::abs(x) <= kScale);
      sum += x;
      sum_abs += std::abs(x);
    }
    EXPECT_LT(same, kCount / 50) << "different seeds must give different values";
    EXPECT_EQ(zeros, 0u);
    EXPECT_EQ(out_of_range, 0u);
    EXPECT_NEAR(sum / kCount, 0.0, 0.05);
    EXPECT_NEAR(sum_abs / kCount, kScale / 2, 0.05);
  }
  cudaFree(buffer);
}

}  // namespace
}  // namespace flash::test
