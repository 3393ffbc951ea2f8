// The ring engine behind flash::cp::ring_attention_forward, apart from how
// K/V travel: a step computes the rank's parts of that step (schedule.h) on
// the K/V it holds and merges them into the running result; finish()
// writes the result into the caller's O and LSE. The NCCL driver (ring.cpp)
// moves K/V between steps; the tests move them with copies to run every
// rank of a ring on one GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "flash/cp.hpp"

namespace flash::cp::detail {

// Offsets into RingParams::buffer, 256-byte aligned.
struct Layout {
  int64_t chunk = 0;          // c: tokens per chunk
  size_t kv_bytes = 0;        // one of K or V of a held pair, [batch, 2c, heads_kv, head_dim]
  size_t slot_k[2] = {0, 0};  // the two receive slots
  size_t slot_v[2] = {0, 0};
  size_t o_bytes = 0;           // one chunk's O, [batch, c, heads_q, head_dim]
  size_t lse_bytes = 0;         // one chunk's LSE, [batch, heads_q, c]
  size_t o_states[2] = {0, 0};  // per chunk: running O, then the step's partial O (o_bytes apart)
  size_t lse_states[2] = {0, 0};
  size_t total = 0;
};
Layout layout_of(const AttentionParams& local);

// validate() without the buffer checks (for the size query).
Status check_shape(const RingParams& params) noexcept;

class Ring {
 public:
  // `params` already validated; it must outlive the Ring.
  explicit Ring(const RingParams& params);

  // The K/V the rank holds at step s: its own at step 0, then slot s % 2.
  const void* k_at(int step) const;
  const void* v_at(int step) const;
  // Where the K/V of step s + 1 arrive.
  void* k_next(int step) const;
  void* v_next(int step) const;
  size_t kv_bytes() const { return layout_.kv_bytes; }

  // Step s's attention calls and merges, on `stream`.
  Status compute_step(int step, cudaStream_t stream);
  // The running O and LSE into the caller's, on `stream`.
  Status finish(cudaStream_t stream) const;

 private:
  char* at(size_t offset) const { return static_cast<char*>(params_.buffer) + offset; }
  const RingParams& params_;
  Layout layout_;
  bool seen_[2] = {false, false};
};

}  // namespace flash::cp::detail
