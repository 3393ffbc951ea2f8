// Host-side descriptions of the sm80 kernel's compiled configurations, for
// dispatch, the autotuner and flash::query_kernel_choice.
#include <cstdint>
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

template <int kHeadDim, int kIndex>
constexpr int smem_bytes() {
  using Tile = CandidateTile<kHeadDim, kIndex>;
  // Any 16-bit element type gives the same footprint.
  return FwdTraits<kHeadDim, Tile::kBlockM, Tile::kBlockN, Tile::kNWarps, Tile::kStages, uint16_t>::kSmemBytes;
}

struct CandidateFacts {
  int smem = 0;
  bool fallback = false;
};

template <int kHeadDim>
CandidateFacts facts(int index) {
  if (index == 0) return {smem_bytes<kHeadDim, 0>(), kFallbackOnly<kHeadDim, 0>};
  if constexpr (kNumCandidates<kHeadDim> > 1) {
    if (index == 1) return {smem_bytes<kHeadDim, 1>(), kFallbackOnly<kHeadDim, 1>};
  }
  if constexpr (kNumCandidates<kHeadDim> > 2) {
    if (index == 2) return {smem_bytes<kHeadDim, 2>(), kFallbackOnly<kHeadDim, 2>};
  }
  static_assert(kNumCandidates<kHeadDim> <= kMaxCandidates, "extend the candidate switches");
  return {};
}

CandidateFacts facts_for(int64_t head_dim, int index) {
  switch (head_dim) {
    case 32: return facts<32>(index);
    case 64: return facts<64>(index);
    case 96: return facts<96>(index);
    case 128: return facts<128>(index);
    case 192: return facts<192>(index);
    case 256: return facts<256>(index);
    default: return {};
  }
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
  if constexpr (kNumCandidates<kHeadDim> > 2) {
    if (index == 2) {
      describe<kHeadDim, 2>(c);
      return true;
    }
  }
  return false;
}

}  // namespace

int candidate_smem_bytes(int64_t head_dim, int index) { return facts_for(head_dim, index).smem; }
bool candidate_is_fallback(int64_t head_dim, int index) { return facts_for(head_dim, index).fallback; }

int num_candidates(int64_t head_dim) {
  switch (head_dim) {
    case 32: return kNumCandidates<32>;
    case 64: return kNumCandidates<64>;
    case 96: return kNumCandidates<96>;
    case 128: return kNumCandidates<128>;
    case 192: return kNumCandidates<192>;
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
    case 192: return describe_head_dim<192>(index, choice);
    case 256: return describe_head_dim<256>(index, choice);
    default: return false;
  }
}

}  // namespace flash::sm80
