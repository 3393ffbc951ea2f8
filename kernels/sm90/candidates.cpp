// Host-side descriptions of the sm90 kernel's compiled configurations, for
// dispatch, the autotuner and flash::query_kernel_choice.
#include <cstdio>
#include <utility>

#include "api.h"
#include "kernel_traits.cuh"
#include "tma_limits.h"

namespace flash::sm90 {
namespace {

// A tile of block_m x block_n with `stages` K/V stages; `kind` names a
// kernel family ("" or "fp8 ").
void describe_tile(int block_m, int block_n, int stages, const char* kind, KernelChoice* c) {
  c->backend = Backend::kSm90;
  c->block_m = block_m;
  c->block_n = block_n;
  c->warps = block_m / kWarpgroupRows;  // consumer warpgroups
  c->stages = stages;
  std::snprintf(c->name, sizeof(c->name), "sm90 %s%dx%d %dwg %dst", kind, block_m, block_n, c->warps, stages);
}

template <int kHeadDim, bool kMasked, int kIndex>
void describe(KernelChoice* c) {
  using Tile = CandidateTile<kHeadDim, kMasked, kIndex>;
  describe_tile(Tile::kBlockM, Tile::kBlockN, Tile::kStages, "", c);
}

template <int kHeadDim, bool kMasked, int... kIndex>
bool describe_index(int index, KernelChoice* c, std::integer_sequence<int, kIndex...>) {
  return ((index == kIndex && (describe<kHeadDim, kMasked, kIndex>(c), true)) || ...);
}

template <int kHeadDim, bool kMasked>
bool describe_head_dim(int index, KernelChoice* c) {
  return describe_index<kHeadDim, kMasked>(index, c,
                                           std::make_integer_sequence<int, kNumCandidates<kHeadDim, kMasked>>{});
}

template <int kHeadDim, bool kMasked>
void describe_fp8_tile(KernelChoice* c) {
  using Tile = Fp8Tile<kHeadDim, kMasked>;
  describe_tile(Tile::kBlockM, Tile::kBlockN, Tile::kStages, "fp8 ", c);
}

}  // namespace

bool describe_gather(int64_t head_dim, KernelChoice* choice) {
  const GatherTile g = gather_tile(head_dim);
  if (g.block_n == 0) return false;
  describe_tile(g.block_m, g.block_n, g.stages, "", choice);
  return true;
}

bool describe_fp8(int64_t head_dim, bool masked, KernelChoice* choice) {
  switch (head_dim) {
    case 64: return (masked ? describe_fp8_tile<64, true>(choice) : describe_fp8_tile<64, false>(choice)), true;
    case 128: return (masked ? describe_fp8_tile<128, true>(choice) : describe_fp8_tile<128, false>(choice)), true;
    case 256: return (masked ? describe_fp8_tile<256, true>(choice) : describe_fp8_tile<256, false>(choice)), true;
    default: return false;
  }
}

int num_candidates(int64_t head_dim, bool masked) {
  switch (head_dim) {
    case 64: return masked ? kNumCandidates<64, true> : kNumCandidates<64, false>;
    case 96: return masked ? kNumCandidates<96, true> : kNumCandidates<96, false>;
    case 128: return masked ? kNumCandidates<128, true> : kNumCandidates<128, false>;
    case 192: return masked ? kNumCandidates<192, true> : kNumCandidates<192, false>;
    case 256: return masked ? kNumCandidates<256, true> : kNumCandidates<256, false>;
    default: return 0;
  }
}

bool describe_candidate(int64_t head_dim, bool masked, int index, KernelChoice* choice) {
  switch (head_dim) {
    case 64: return masked ? describe_head_dim<64, true>(index, choice) : describe_head_dim<64, false>(index, choice);
    case 96: return masked ? describe_head_dim<96, true>(index, choice) : describe_head_dim<96, false>(index, choice);
    case 128:
      return masked ? describe_head_dim<128, true>(index, choice) : describe_head_dim<128, false>(index, choice);
    case 192:
      return masked ? describe_head_dim<192, true>(index, choice) : describe_head_dim<192, false>(index, choice);
    case 256:
      return masked ? describe_head_dim<256, true>(index, choice) : describe_head_dim<256, false>(index, choice);
    default: return false;
  }
}

bool describe_fp8_cache(int64_t head_dim, bool masked, DType dtype, KernelChoice* choice) {
  if (!describe_candidate(head_dim, masked, cache_candidate(head_dim, true), choice)) return false;
  if (fp8_cache_compact_k(head_dim, dtype)) {
    describe_tile(choice->block_m, choice->block_n, kFp8CacheCompactStages, "", choice);
  }
  return true;
}

}  // namespace flash::sm90
