// The forward matrix: flash::attention_forward against the cuBLAS reference
// for every dtype x head dim x causal, each over 18 (seqlen_q, seqlen_k)
// pairs on and around the tile edges, equal and unequal both ways.
//
// 2 dtypes x 5 head dims x 2 = 20 tests x 18 length pairs = 360 cases, each
// run with every backend the GPU has (sm80; sm90 too for head dims 64, 128,
// 256 on Hopper). The GQA ratio (heads_kv = 2, heads_q = 2 / 8 / 16), the
// layout and the batch (1 or 3; 1 when a length exceeds 255) rotate across
// the cases so that every length meets every ratio and every layout, both
// causal and not.
#include <cinttypes>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_case.h"

namespace flash::test {
namespace {

struct LengthPair {
  int64_t q, k;
};
constexpr LengthPair kLengths[] = {
    {1, 1},       {17, 17},    {63, 63},    {64, 64},     {65, 65},     {127, 127},
    {128, 128},   {129, 129},  {255, 255},  {1000, 1000}, {2049, 2049}, {1, 1000},
    {1000, 1},    {17, 129},   {129, 17},   {65, 2049},   {2049, 255},  {255, 63},
};
constexpr int kNumLengths = sizeof(kLengths) / sizeof(kLengths[0]);
constexpr int64_t kHeadsKV = 2;
constexpr int64_t kHeadsQ[] = {2, 8, 16};  // GQA ratios 1, 4, 8
constexpr Layout kLayouts[] = {Layout::kBNHD, Layout::kBHND, Layout::kPacked, Layout::kPadded};
constexpr int64_t kMaxLengthForBatch3 = 255;

struct MatrixParam {
  DType dtype;
  int64_t head_dim;
  bool causal;
  int index;  // position in all_params(): seeds and rotations
};

std::vector<MatrixParam> all_params() {
  std::vector<MatrixParam> params;
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t head_dim : {32, 64, 96, 128, 192, 256}) {
      for (bool causal : {false, true}) {
        params.push_back({dtype, head_dim, causal, static_cast<int>(params.size())});
      }
    }
  }
  return params;
}

std::string param_name(const ::testing::TestParamInfo<MatrixParam>& info) {
  const MatrixParam& p = info.param;
  return std::string(p.dtype == DType::kFloat16 ? "Fp16" : "Bf16") + "_Hd" + std::to_string(p.head_dim) +
         (p.causal ? "_Causal" : "_Full");
}

// How GoogleTest (and so ctest's test names) print a parameter.
void PrintTo(const MatrixParam& p, std::ostream* os) {
  *os << (p.dtype == DType::kFloat16 ? "fp16" : "bf16") << " hd" << p.head_dim << (p.causal ? " causal" : " full");
}

// Length pair j of matrix test p. The rotations were chosen (and checked
// by enumeration) so that each length pair meets all three GQA ratios and,
// causal and not, all four layouts.
CaseConfig matrix_case(const MatrixParam& p, int j) {
  CaseConfig cfg;
  cfg.dtype = p.dtype;
  cfg.head_dim = p.head_dim;
  cfg.causal = p.causal;
  cfg.seqlen_q = kLengths[j].q;
  cfg.seqlen_k = kLengths[j].k;
  cfg.heads_kv = kHeadsKV;
  cfg.heads_q = kHeadsQ[(j + p.index) % 3];
  cfg.layout = kLayouts[(j + p.index / 2) % 4];
  const bool small = cfg.seqlen_q <= kMaxLengthForBatch3 && cfg.seqlen_k <= kMaxLengthForBatch3;
  cfg.batch = small && (j + p.index / 4) % 2 == 0 ? 3 : 1;
  cfg.seed = case_seed(static_cast<uint64_t>(p.index * kNumLengths + j));
  return cfg;
}

class ForwardMatrix : public GpuTest, public ::testing::WithParamInterface<MatrixParam> {};

TEST_P(ForwardMatrix, MatchesCublasReference) {
  const MatrixParam& p = GetParam();
  if (!head_dim_compiled(p.head_dim)) {
    GTEST_SKIP() << "head_dim " << p.head_dim << " is not in this build's FLASH_HEAD_DIMS";
  }
  WorstErrors worst;
  for (int j = 0; j < kNumLengths; ++j) {
    expect_matches_reference(matrix_case(p, j), cublas_, stream_, &worst);
    if (HasFatalFailure()) return;  // a CUDA error poisons the rest of the process
  }
  std::printf("  %" PRId64 " runs; worst rel_l2 %.3g, max_abs / max|ref| %.3g, lse %.3g\n", worst.cases,
              worst.worst.rel_l2, worst.worst.max_abs_rel(), worst.worst.max_lse);
}

INSTANTIATE_TEST_SUITE_P(All, ForwardMatrix, ::testing::ValuesIn(all_params()), param_name);
// Every row may be pruned away by FLASH_HEAD_DIMS.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ForwardMatrix);

}  // namespace
}  // namespace flash::test
