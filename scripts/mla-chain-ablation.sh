#!/usr/bin/env bash
# What the Hopper MLA kernel's chain between its GEMMs costs: the "floor"
# of scripts/mla-ablate.sh (no copies after the first block, S and P V one
# k16 step each) against the same with one more piece taken out: the two
# proxy fences, the block barrier, the row-maximum barrier, the barrier
# that publishes P, the exponentials. Every variant but base computes
# wrong results; they only time what is left. Then the S-by-columns patch
# (docs/history/patches/2026-12-06-mla-s-by-columns.patch) beside base.
#
#   OUT=out scripts/mla-chain-ablation.sh        (ROWS, ROUNDS, NCU as mla-ablate.sh)
set -uo pipefail
floor='s/if (n_block + 1 < s_end) load_k/if (false) load_k/;;s|kk < Traits::kHeadDim / 16; ++kk|kk < 1; ++kk|;;s|kk < kBlockN / 16; ++kk|kk < 1; ++kk|'
ROWS=${ROWS:-"64 8192 128 1"} exec "$(dirname "$0")/mla-ablate.sh" 'base:' \
  'cols:@docs/history/patches/2026-12-06-mla-s-by-columns.patch' \
  "floor:$floor" \
  "nofence:$floor;;s/^    fence_proxy_async_smem();\$/    \\/\\/ no fence/" \
  "nosync:$floor;;/^    fence_proxy_async_smem();\$/{n;s/^    __syncthreads();\$/    \\/\\/ no sync/}" \
  "nobar1:$floor;;s/^    named_barrier_sync(1, kThreads);\$/    \\/\\/ no bar1/" \
  "nobar2:$floor;;s/^    named_barrier_sync(2, kThreads);\$/    \\/\\/ no bar2/" \
  "noexp:$floor;;s/ptx::exp2_approx(fmaf(s4/(fmaf(s4/"
