// Append and attend (AttentionParams::k_new): the workspace the append
// needs, the plain call that runs after it, and its launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "flash/flash.hpp"

namespace flash::detail {

// Whether `p` appends new K/V rows before attending.
inline bool appends(const AttentionParams& p) noexcept { return p.k_new != nullptr; }

// Bytes at the start of the workspace an appending call uses (0 for one
// that does not): the lengths after the append (batch int32), then, with
// rotary, the rotated Q (densely packed [rows, heads_q, head_dim]), each
// rounded up to 256 bytes. SIZE_MAX when it does not fit in size_t.
size_t append_workspace_bytes(const AttentionParams& p) noexcept;

// The call that attends after the append: seqused_k the lengths in the
// workspace, Q its rotated copy (with rotary), the workspace past the
// append's bytes, no append fields. `p` itself when it does not append.
// Without a workspace (sizing and planning only) the pointers stay p's.
AttentionParams attention_call(const AttentionParams& p) noexcept;

// Launches the append (and rotation) of an accepted call on `stream`.
cudaError_t launch_append(const AttentionParams& p, cudaStream_t stream) noexcept;

}  // namespace flash::detail
