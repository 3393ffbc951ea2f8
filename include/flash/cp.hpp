// flash::cp: context-parallel (ring) attention over NCCL, the optional
// component built as the flash::cp target when NCCL is found.
//
// The sequence is sharded zigzag across R ranks: each sequence's N tokens
// are cut into 2R chunks of c = N / 2R tokens, and rank r holds chunks r
// and 2R - 1 - r, concatenated, so that every rank has the same share of
// causal work. Each rank passes its shard as an ordinary dense call
// (RingParams::local: seqlen_q = seqlen_k = 2c) and gets its rows of the
// unsharded result: O, and the LSE when asked for. K/V shards travel
// around the ring (ncclSend / ncclRecv on a second stream, overlapped with
// the attention on the shard in hand); each step's partial result is
// merged into the running one by log-sum-exp (flash::merge_states).
// Nothing is allocated on the device: the caller passes one buffer of
// ring_buffer_size() bytes. Keep NCCL_NVLS_ENABLE=0 in the environment
// on machines where NVLink multicast is off.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>

#include "flash/flash.hpp"

namespace flash::cp {

struct RingParams {
  // This rank's two chunks as one dense call: batch, heads_q / heads_kv,
  // head_dim, dtype, causal or not, softmax_scale, seqlen_q = seqlen_k = 2c
  // (the same on every rank). K and V must be densely packed
  // [batch, 2c, heads_kv, head_dim] (what is sent), and O densely packed
  // [batch, 2c, heads_q, head_dim]; Q may have any strides
  // attention_forward takes; the LSE, when non-null, is
  // [batch, heads_q, 2c]. Not supported here: varlen, seqused_k, paged K/V,
  // windows, softcap, sinks, ALiBi, num_splits > 1, a head_dim_v of its
  // own, k_new and rotary (each is refused).
  AttentionParams local;
  int32_t rank = 0;         // 0 .. world - 1, as in the communicator
  int32_t world = 1;        // ranks in the ring
  void* buffer = nullptr;   // device memory, 256-byte aligned
  size_t buffer_bytes = 0;  // at least ring_buffer_size()
};

// Bytes of RingParams::buffer for `params` (its buffer fields are ignored):
// two K/V receive slots and, per chunk, the running and the step's partial
// O (in the input dtype) and LSE.
Status ring_buffer_size(const RingParams& params, size_t* bytes) noexcept;

// Checks every argument without touching the GPU.
Status validate(const RingParams& params) noexcept;

// This rank's share of the ring, asynchronously: the attention and merges
// on `stream`, the K/V exchange on `comm_stream` (a different stream; both
// on the current device, which must be the communicator's). `comm` must
// hold `world` ranks with this one at `rank`; every rank must make the
// same call (same sizes, causal flag and dtype). Returns after enqueuing;
// O and the LSE are ready when `stream` is.
Status ring_attention_forward(const RingParams& params, ncclComm_t comm, CUstream_st* stream,
                              CUstream_st* comm_stream) noexcept;

}  // namespace flash::cp
