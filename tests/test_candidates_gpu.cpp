// Every compiled kernel configuration, not only the ones the heuristic
// picks, computes attention: each candidate dispatch.h lists for a shape
// (sm90 tiles, sm80 tiles) runs on the same ragged GQA inputs and matches
// the cuBLAS reference, unmasked, causal and under a causal left window,
// with and without an LSE (at head dim 64 a call without one runs kernels
// of its own), for every compiled head dim. The autotuner may pick any of
// them, so each must be right; so must the sm80 fallback tiles, which the
// plan offers only on GPUs where candidate 0 does not fit.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "gpu_case.h"
#include "kernels/sm80/api.h"
#include "src/dispatch.h"

namespace flash::test {
namespace {

constexpr uint64_t kSeedBase = 4u << 20;  // apart from the other suites' seeds

class Candidates : public GpuTest {};

TEST_F(Candidates, EveryCompiledConfigurationMatchesTheReference) {
  detail::DeviceCaps caps;
  const Status device = detail::query_device(&caps);
  ASSERT_TRUE(device.ok()) << device.message;
  uint64_t index = 0;
  int ran = 0;
  int fallbacks = 0;  // fallback tiles launched beyond the plan's candidates
  for (int64_t d : {32, 64, 96, 128, 192, 256}) {
    if (!head_dim_compiled(d)) continue;
    struct Mask {
      bool causal;
      int64_t window_left;
      bool lse;
    };
    for (const Mask& mask : {Mask{false, -1, true}, Mask{true, -1, true}, Mask{true, -1, false}, Mask{true, 100, true},
                             Mask{true, 100, false}}) {
      const bool causal = mask.causal;
      CaseConfig cfg;
      cfg.dtype = (index % 2 == 0) ? DType::kBFloat16 : DType::kFloat16;
      cfg.head_dim = d;
      cfg.causal = causal;
      cfg.window_left = mask.window_left;
      cfg.with_lse = mask.lse;
      cfg.batch = 2;
      cfg.seqlen_q = causal ? 333 : 257;  // more queries than keys under the causal mask: rows with no key
      cfg.seqlen_k = causal ? 200 : 515;
      cfg.heads_q = 8;
      cfg.heads_kv = 2;
      cfg.layout = Layout::kBNHD;
      cfg.seed = case_seed(kSeedBase + ++index);
      SCOPED_TRACE(cfg.name());
      AttentionCase c(cfg, stream_);
      ASSERT_TRUE(c.init());
      std::vector<double> ref_o, ref_lse;
      ASSERT_TRUE(c.run_reference(cublas_, &ref_o, &ref_lse));

      AttentionParams p = c.params();
      p.backend = Backend::kAuto;  // every family the device has
      detail::Plan plan;
      ASSERT_TRUE(detail::make_plan(p, caps, &plan).ok());
      ASSERT_GT(plan.num_candidates, 0);
      // The plan's candidates, and the sm80 fallback tiles it leaves out
      // where candidate 0 fits (an A100 runs them at head dim 256).
      std::vector<detail::Candidate> candidates(plan.candidates, plan.candidates + plan.num_candidates);
      for (int i = 0; i < sm80::num_candidates(d); ++i) {
        const auto same = [&](const detail::Candidate& x) { return x.backend == Backend::kSm80 && x.index == i; };
        const bool planned = std::any_of(candidates.begin(), candidates.end(), same);
        if (!planned && sm80::candidate_is_fallback(d, i) && sm80::candidate_smem_bytes(d, i) <= caps.max_smem) {
          candidates.push_back(detail::Candidate{Backend::kSm80, i});
          ++fallbacks;
        }
      }
      for (const detail::Candidate& candidate : candidates) {
        KernelChoice choice;
        ASSERT_TRUE(detail::describe(plan, candidate, p, &choice));
        SCOPED_TRACE(choice.name);
        ASSERT_EQ(c.poison_outputs(), cudaSuccess);
        ASSERT_EQ(detail::launch(plan, candidate, p, c.stream()), cudaSuccess);
        std::vector<float> o, lse;
        ASSERT_TRUE(c.read_output(&o, &lse));
        Errors errors;
        EXPECT_TRUE(check_attention(c.params(), o, lse, ref_o, ref_lse, &errors));
        EXPECT_TRUE(c.padding_untouched());
        ++ran;
      }
    }
  }
  if (ran == 0) GTEST_SKIP() << "no head dim compiled";
  // hd256's 64 x 64 tile: the plan offers it only where candidate 0 does not fit.
  if (head_dim_compiled(256) && sm80::candidate_smem_bytes(256, 0) <= caps.max_smem) {
    EXPECT_GT(fallbacks, 0);
  }
}

}  // namespace
}  // namespace flash::test
