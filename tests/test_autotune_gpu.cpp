// The autotuner on a GPU (issue 4):
//   - an autotuned call computes the same function as the heuristic's: both
//     match the cuBLAS reference within the dtype's bounds, for every head
//     dim with several compiled configurations, causal or not;
//   - after tuning, query_kernel_choice names one of the compiled
//     configurations with source kTuned, and later calls give the first
//     tuned call's bits;
//   - a call captured into a CUDA graph never tunes: it succeeds during the
//     capture and the shape class stays untuned (source kHeuristic).
// The tuning cache is process-wide, so each test uses shapes of its own.
#include <cstring>
#include <string>
#include <vector>

#include "gpu_case.h"

namespace flash::test {
namespace {

constexpr uint64_t kSeedBase = 3u << 20;  // apart from the other suites' seeds

CaseConfig make_case(DType dtype, int64_t head_dim, bool causal, int64_t seqlen_q, int64_t seqlen_k, uint64_t index) {
  CaseConfig cfg;
  cfg.dtype = dtype;
  cfg.head_dim = head_dim;
  cfg.causal = causal;
  cfg.batch = 2;
  cfg.seqlen_q = seqlen_q;
  cfg.seqlen_k = seqlen_k;
  cfg.heads_q = 8;
  cfg.heads_kv = 2;
  cfg.layout = Layout::kBNHD;
  cfg.seed = case_seed(kSeedBase + index);
  return cfg;
}

class Autotune : public GpuTest {};

TEST_F(Autotune, TunedCallsComputeTheSameFunction) {
  uint64_t index = 0;
  int ran = 0;
  for (int64_t d : {64, 128, 256}) {
    if (!head_dim_compiled(d)) continue;
    for (bool causal : {false, true}) {
      for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
        // Ragged, GQA, and a shape class of its own per case.
        ++index;
        const CaseConfig cfg = make_case(dtype, d, causal, 300 + 17 * static_cast<int64_t>(index), 700, index);
        SCOPED_TRACE(cfg.name());
        AttentionCase c(cfg, stream_);
        ASSERT_TRUE(c.init());
        std::vector<double> ref_o, ref_lse;
        ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));

        AttentionParams p = c.params();
        p.autotune = false;
        KernelChoice heuristic;
        ASSERT_TRUE(query_kernel_choice(p, &heuristic).ok());
        EXPECT_EQ(heuristic.source, ChoiceSource::kHeuristic);
        Status s = c.run_flash_with(p);
        ASSERT_TRUE(s.ok()) << s.message;
        std::vector<float> o, lse;
        ASSERT_TRUE(c.read_output(&o, &lse));
        Errors errors;
        EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse, &errors)) << "heuristic " << heuristic.name;

        p.autotune = true;
        s = c.run_flash_with(p);  // tunes, then runs the winner on the real buffers
        ASSERT_TRUE(s.ok()) << s.message;
        std::vector<uint16_t> first_raw;
        std::vector<float> first_lse;
        ASSERT_TRUE(c.read_raw(&first_raw, &first_lse));
        ASSERT_TRUE(c.read_output(&o, &lse));
        KernelChoice tuned;
        ASSERT_TRUE(query_kernel_choice(p, &tuned).ok());
        EXPECT_EQ(tuned.source, ChoiceSource::kTuned) << tuned.name;
        EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse, &errors)) << "tuned " << tuned.name;
        EXPECT_TRUE(c.padding_untouched());

        s = c.run_flash_with(p);  // from the cache now
        ASSERT_TRUE(s.ok()) << s.message;
        std::vector<uint16_t> again_raw;
        std::vector<float> again_lse;
        ASSERT_TRUE(c.read_raw(&again_raw, &again_lse));
        EXPECT_EQ(first_raw, again_raw) << "tuned calls differ bitwise (" << tuned.name << ")";
        EXPECT_EQ(0, std::memcmp(first_lse.data(), again_lse.data(), first_lse.size() * sizeof(float)));
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no head dim with several configurations compiled";
}

TEST_F(Autotune, NeverTunesWhileCapturing) {
  int64_t d = 0;
  for (int64_t cand : {128, 64, 256}) {
    if (head_dim_compiled(cand)) {
      d = cand;
      break;
    }
  }
  if (d == 0) GTEST_SKIP() << "no head dim with several configurations compiled";
  const CaseConfig cfg = make_case(DType::kBFloat16, d, true, 1234, 1234, 100);
  AttentionCase c(cfg, stream_);
  ASSERT_TRUE(c.init());
  AttentionParams p = c.params();
  p.autotune = true;

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status s = attention_forward(p, stream_);
  const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
  EXPECT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
  if (graph != nullptr) cudaGraphDestroy(graph);

  KernelChoice choice;
  ASSERT_TRUE(query_kernel_choice(p, &choice).ok());
  EXPECT_EQ(choice.source, ChoiceSource::kHeuristic) << "a capture tuned " << choice.name;
}

}  // namespace
}  // namespace flash::test
