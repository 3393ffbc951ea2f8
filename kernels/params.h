// Kernel-side arguments of one forward call, filled by src/ after every
// check has passed. Plain C++ (no CUDA types) so host code can build it.
#pragma once

#include <cstdint>

#include "common/fast_divmod.h"

namespace flash::detail {

// Which compiled mask variant runs a call; decided once, by the plan (src/plan.cpp).
enum class MaskVariant : int {
  kTail,     // no window: only the ragged tail of the keys
  kCausal,   // a right edge only: causal (window (-1, 0)) or window_right >= 0 alone
  kWindow,   // a left edge (window_left >= 0), with or without a right one
  kScoreMod,  // a logit softcap and/or ALiBi, with any window or none: every mask edge and both modifiers compiled in
};

struct FwdParams {
  const void* q;  // Q base pointer, [batch, seqlen_q, heads_q, head_dim].
  const void* k;  // K base pointer, [batch, seqlen_k, heads_kv, head_dim].
  const void* v;  // V base pointer, [batch, seqlen_k, heads_kv, head_dim_v].
  void* o;        // O base pointer, [batch, seqlen_q, heads_q, head_dim_v].
  float* lse;     // Optional LSE, [batch, heads_q, seqlen_q] contiguous; may be null.

  int64_t q_batch_stride, q_seq_stride, q_head_stride;  // Strides of Q, in elements.
  int64_t k_batch_stride, k_seq_stride, k_head_stride;  // Strides of K, in elements.
  int64_t v_batch_stride, v_seq_stride, v_head_stride;  // Strides of V, in elements.
  int64_t o_batch_stride, o_seq_stride, o_head_stride;  // Strides of O, in elements.

  int batch;      // Number of sequences (gridDim.z).
  int seqlen_q;   // Query rows per sequence.
  int seqlen_k;   // Key rows per sequence.
  int heads_q;    // Query heads (gridDim.y).
  int heads_kv;   // Key/value heads.
  int q_per_kv;   // heads_q / heads_kv: query heads sharing one K/V head.
  // The call's widths of Q K^T (head_dim) and of V and O (head_dim_v),
  // multiples of 8 at most the kernel's compiled one (kHeadDim). Narrower
  // calls run on the next compiled size: Q and K columns from head_dim on,
  // and V columns from head_dim_v on, are zero in the kernel's tiles (never
  // read from global memory); O columns from head_dim_v on are never stored.
  // Split partials keep kHeadDim columns, of which head_dim_v are written.
  int head_dim;
  int head_dim_v;
  int num_sms;    // Multiprocessors of the device: bounds a persistent grid.
  int cc_major;   // Compute capability major of the device (programmatic dependent launch from 9).
  // The sm90 kernel's schedule of a causal call (tile_scheduler.cuh,
  // UnitMap::section): 0, causal pairs; n > 0, single tiles longest first in
  // sections of n (batch x head) indices. Set by its launcher.
  int sched_section;
  // The sm90 kernel's walk divides by these once or twice a tile: the
  // padded numbering's units a (batch x head) index
  // (UnitMap::unit_divisor) and heads_q. Set by its launcher
  // (sm90::launch_fwd, every sm90 forward launch); zeroed, div(n) would
  // return n and divmod's remainder n.
  FastDivmod sched_unit_div;
  FastDivmod sched_heads_div;
  // The launch follows the append kernel (kernels/append) on the stream: the
  // decode kernel may then start as its programmatic dependent (sm_90+).
  bool follows_append;
  // The append's inputs, for the decode kernel to do the whole append
  // itself (decode_kernel.cuh, KernelAppend) where `writes` is set (the
  // host ran no append kernel): q, its strides and seqused_k are the
  // call's own (Q not rotated, the lengths before the append); the kernel
  // adds each sequence's new rows to its key count, rotates its Q tile in
  // shared memory as the append kernel rotates Q (common/rotary.cuh: the
  // same bits), writes the new rows into the cache, and puts each block's
  // new rows in its tiles from k_new / v_new (keys rotated alike), never
  // from the cache.
  struct AppendFusion {
    bool writes;
    const void* k_new;  // [batch, seqlen_new, heads_kv, d], or packed with cu_seqlens_new
    const void* v_new;
    int64_t k_new_batch_stride, k_new_seq_stride, k_new_head_stride;
    int64_t v_new_batch_stride, v_new_seq_stride, v_new_head_stride;
    const void* q;  // Q as the caller passed it, and its strides
    int64_t q_batch_stride, q_seq_stride, q_head_stride;
    const int* seqused_k;       // the lengths before the append
    const int* cu_seqlens_new;  // new rows per sequence, packed; null: seqlen_new each
    int seqlen_new;
    const float* rotary_cos;    // [rotary_positions, rotary_dim / 2], or null: no rotation
    const float* rotary_sin;
    int rotary_dim;
    int rotary_positions;
    bool rotary_interleaved;
  } append;

  float softmax_scale;       // Scale applied to Q K^T (natural-log domain, for the LSE).
  float softmax_scale_log2;  // softmax_scale * log2(e): folds the scale into the exp2 FFMA.

  // Inference-engine features; every kernel takes all of them, with these
  // limits on the sm90 kernel: varlen only with total_q / total_k, and a
  // call with seqused_k or a paged cache is not split (src/plan.cpp). See AttentionParams for
  // the semantics.
  const int* cu_seqlens_q;  // varlen Q/O: [batch + 1] row offsets, or null
  const int* cu_seqlens_k;  // varlen K/V: [batch + 1] row offsets, or null
  const int* seqused_k;     // keys used per sequence, or null
  int64_t total_q;          // varlen: rows of packed Q/O (sm90 tensor maps; 0 if not given)
  int64_t total_k;          // varlen: rows of packed K/V (sm90 tensor maps; 0 if not given)
  const int* block_table;   // paged K/V: [batch, block_table_batch_stride], or null
  int64_t block_table_batch_stride;
  int64_t num_pages;     // paged: pages in K and V (the sm90 kernel's tensor maps)
  int page_size;         // keys per page (any positive size)
  int page_shift;        // log2(page_size) when it is a power of two (shift and mask instead of / and %), else -1
  int max_seqlen_k_alloc;  // keys the K/V allocation holds per sequence (dense seqlen_k, paged pages*page_size)
  int window_left;       // -1: unbounded (causal is window_right = 0)
  int window_right;      // -1: unbounded
  // Softcap: when softcap > 0, the kernels replace s by tanh(s * softcap_prescale),
  // softcap_prescale = (user scale) / softcap, and the host folds the cap into
  // the softmax: softmax_scale = softcap, softmax_scale_log2 = softcap * log2(e),
  // so the LSE comes out in units of the capped scores.
  float softcap;
  float softcap_prescale;
  // ALiBi: [heads_q] float32 slopes, or null (AttentionParams::alibi_slopes);
  // alibi_scale = 1 / softmax_scale as the kernels use it (after the softcap's
  // folding), the factor from natural-log units to the kernels' score units.
  const float* alibi_slopes;
  float alibi_scale;
  // Attention sinks: [heads_q] float32 logits, or null (AttentionParams::sinks).
  // Unsplit kernels add them in their epilogue (add_sink, softmax.cuh);
  // split calls write partials without them and the combine adds each once.
  const float* sinks;
  // FP8 KV cache (AttentionParams::kv_dtype; the decode kernel's fp8
  // instantiations): K = k_descale[h * descale_head_stride] * K_fp8 and V
  // likewise for K/V head h; null factors are 1.
  const float* k_descale;
  const float* v_descale;
  int64_t descale_head_stride;
  // FP8 prefill (AttentionParams::q_dtype e4m3; kernels/sm90/fp8_kernel.cuh):
  // Q = q_descale[h * descale_head_stride] * Q_fp8 for K/V head h (null: 1),
  // and V transposed into the workspace, fp8_vt_cols one-byte columns per
  // (K/V head, head-dim row) (kernels/sm90/fp8_vt.h); null otherwise.
  const float* q_descale;
  void* fp8_vt;
  int64_t fp8_vt_cols;

  // Split-KV (decode and sm90 kernels): num_splits > 1 writes fp32 partial O and LSE
  // per split to the workspace, [num_splits, batch, heads_q, seqlen_q, kHeadDim]
  // and [num_splits, batch, heads_q, seqlen_q]; the combine kernel merges them.
  int num_splits;
  float* o_partial;
  float* lse_partial;
};

}  // namespace flash::detail
