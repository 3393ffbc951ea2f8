// Choosing among compiled configurations at run time: the heuristic's pick
// unless autotuning applies, in which case a cached result (in memory, or
// read once from FLASH_AUTOTUNE_CACHE), or a fresh measurement.
#pragma once

#include <cuda_runtime_api.h>

#include "flash/flash.hpp"
#include "src/dispatch.h"

namespace flash::detail {

// params.autotune, or FLASH_AUTOTUNE set to anything but "" or "0".
bool autotune_requested(const AttentionParams& p);

struct Selection {
  Candidate candidate;
  ChoiceSource source = ChoiceSource::kHeuristic;
};

// Picks the configuration for `p` among plan.candidates (the first is the
// heuristic's; calls the plan marks untunable always get it). With autotuning requested (or a cache file named), looks up
// the shape class; with `may_tune`, no result yet, and `stream` not being
// captured, times every candidate on scratch outputs (allocating them and
// synchronising `stream`) and remembers the fastest (and writes the cache
// file, if named). Returns the CUDA error that left tuning unable to finish,
// else cudaSuccess; *selection is always valid.
cudaError_t select_candidate(const AttentionParams& p, const Plan& plan, cudaStream_t stream, bool may_tune,
                             Selection* selection);

}  // namespace flash::detail
