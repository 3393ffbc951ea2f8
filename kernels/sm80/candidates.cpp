// Host-side descriptions of the sm80 kernel's compiled configurations, for
// dispatch, the autotuner and flash::query_kernel_choice.
#include <cstdio>

#include "api.h"
#include "kernel_traits.cuh"

namespace flash::sm80 {
namespace {

template <int kHeadDim, int kIndex>
void describe(KernelChoice* c) {
  using Tile = CandidateTile<kHeadDim, kIndex>;
  c->backend = Backend::kSm80;
  c->block_m = Tile::kBlockM;
  c->block_n = Tile::kBlockN;
  c->warps = Tile::kNWarps;
  c->stages = Tile::kStages;
  std::snprintf(c->name, sizeof(c->name), "sm80 %dx%d %dw %dst", Tile::kBlockM, Tile::kBlockN, Tile::kNWarps,
                Tile::kStages);
}

template <int kHeadDim>
bool describe_head_dim(int index, KernelChoice* c) {
  if (index == 0) {
    describe<kHeadDim, 0>(c);
    return true;
  }
  if constexpr (kNumCandidates<kHeadDim> > 1) {
    if (index == 1) {
      describe<kHeadDim, 1>(c);
      return true;
    }
  }
  return false;
}

}  // namespace

int num_candidates(int64_t head_dim) {
  switch (head_dim) {
    case 32: return kNumCandidates<32>;
    case 64: return kNumCandidates<64>;
    case 96: return kNumCandidates<96>;
    case 128: return kNumCandidates<128>;
    case 256: return kNumCandidates<256>;
    default: return 0;
  }
}

bool describe_candidate(int64_t head_dim, int index, KernelChoice* choice) {
  switch (head_dim) {
    case 32: return describe_head_dim<32>(index, choice);
    case 64: return describe_head_dim<64>(index, choice);
    case 96: return describe_head_dim<96>(index, choice);
    case 128: return describe_head_dim<128>(index, choice);
    case 256: return describe_head_dim<256>(index, choice);
    default: return false;
  }
}

}  // namespace flash::sm80
