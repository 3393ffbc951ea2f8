/* flash: exact attention forward, O = softmax(scale * Q K^T + mask) V, on
 * NVIDIA GPUs (sm_80 and newer). The C API.
 *
 * Plain C99; it mirrors the C++ API of flash/flash.hpp field for field and
 * runs the same checks (it converts its arguments and calls it). Like that
 * header it needs no CUDA headers: pass your cudaStream_t as the `stream`
 * argument unchanged.
 *
 *   flash_attention_params p;
 *   flash_attention_params_init(&p);
 *   p.q = q; p.k = k; p.v = v; p.o = o;
 *   p.batch = 2; p.seqlen_q = p.seqlen_k = 4096;
 *   p.heads_q = 32; p.heads_kv = 8; p.head_dim = 128;
 *   flash_set_contiguous_bnhd(&p);
 *   if (flash_attention_forward(&p, stream) != FLASH_SUCCESS)
 *     fprintf(stderr, "flash: %s\n", flash_last_error_message());
 *
 * Every function is thread-safe. None throws or exits; none prints, but for
 * the autotuner's warnings about the cache file FLASH_AUTOTUNE_CACHE names. */
#ifndef FLASH_FLASH_H_
#define FLASH_FLASH_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "flash/version.h"

#ifdef __cplusplus
extern "C" {
#define FLASH_C_NOEXCEPT noexcept
#else
#define FLASH_C_NOEXCEPT
#endif

/* Element type of Q, K, V and O. Accumulation is always float32. */
typedef enum flash_dtype { FLASH_DTYPE_FLOAT16 = 0, FLASH_DTYPE_BFLOAT16 = 1 } flash_dtype;

/* Element type of K and V (flash_attention_params.kv_dtype): an fp8 KV cache. */
typedef enum flash_kv_dtype {
  FLASH_KV_DTYPE_SAME = 0,       /* K and V have the call's dtype */
  FLASH_KV_DTYPE_FLOAT8_E4M3 = 1 /* OCP e4m3 ("e4m3fn": no infinities, 0x7f / 0xff are NaN), max 448 */
} flash_kv_dtype;

/* Which kernel family runs a call. */
typedef enum flash_backend {
  FLASH_BACKEND_AUTO = 0, /* MLA on sm_90 and e4m3-Q calls: their Hopper kernels at any seqlen_q; the decode
                             kernel for seqlen_q <= 16, fp8-cache calls it splits, head dim 512 and MLA off sm_90;
                             otherwise the Hopper kernel on sm_90 where it supports the shape, else the sm80
                             kernel */
  FLASH_BACKEND_SM80 = 1, /* the FlashAttention-2 mma.sync kernel (sm_80 and newer) */
  FLASH_BACKEND_SM90 = 2, /* the Hopper wgmma/TMA kernel (sm_90 with an sm_90a build; runs head dims on 64, 96, 128, 192, 256) */
  FLASH_BACKEND_DECODE = 3 /* the split-KV decode kernel (mma.sync, sm_80 and newer; short queries: seqlen_q <= 16;
                              AUTO also takes it for fp8 KV cache calls it splits) */
} flash_backend;

/* The result of a call; flash_last_error_message() says more. */
typedef enum flash_status_code {
  FLASH_SUCCESS = 0,
  FLASH_INVALID_ARGUMENT = 1, /* the call was rejected; nothing was launched or written */
  FLASH_UNSUPPORTED = 2,      /* valid, but not supported by this build or this GPU */
  FLASH_CUDA_ERROR = 3        /* the CUDA runtime reported an error */
} flash_status_code;

/* Arguments of one attention call. Shapes, in elements (Dv = head_dim_v,
 * or head_dim when head_dim_v is 0):
 *   Q    : [batch, seqlen_q, heads_q,  head_dim]
 *   K    : [batch, seqlen_k, heads_kv, head_dim]
 *   V    : [batch, seqlen_k, heads_kv, Dv]
 *   O    : [batch, seqlen_q, heads_q,  Dv]
 *   LSE  : [batch, heads_q, seqlen_q], float32, contiguous
 * Each tensor has its own batch, sequence and head strides (in elements, not
 * bytes); the last dimension must be contiguous (stride 1). So both the
 * [B, N, H, D] layout of inference engines and the [B, H, N, D] layout work
 * without copies. Start from flash_attention_params_init(), then call
 * flash_set_contiguous_bnhd() or flash_set_contiguous_bhnd() to fill the
 * strides of densely packed tensors.
 *
 * The struct can grow. Its first field, struct_size, is
 * sizeof(flash_attention_params) as the caller was compiled:
 * flash_attention_params_init sets it (it is inline, so the size is the
 * caller's). Fields are only ever appended, and the library reads only those
 * within the caller's struct_size bytes, giving the rest their defaults (as
 * flash_attention_params_init sets them): a program compiled against an
 * older flash.h works with a newer library. Accepted: a multiple of 8 from
 * the end of `autotune` (the core call, the smallest struct there is) up to
 * the library's own sizeof(flash_attention_params). Every call that takes
 * the struct rejects anything else with FLASH_INVALID_ARGUMENT and a message
 * saying which: 0, a value below that or a huge one (a struct not started
 * with flash_attention_params_init), or one larger than the library's (a
 * program compiled against a newer flash.h than the library it runs with,
 * which refuses rather than ignore fields it does not know). */
typedef struct flash_attention_params {
  size_t struct_size; /* Bytes of this struct as the caller compiled it; set by flash_attention_params_init. */

  const void* q; /* Query, [batch, seqlen_q, heads_q, head_dim]. */
  const void* k; /* Key, [batch, seqlen_k, heads_kv, head_dim]. */
  const void* v; /* Value, [batch, seqlen_k, heads_kv, head_dim] (head_dim_v when set). */
  void* o;       /* Output, [batch, seqlen_q, heads_q, head_dim] (head_dim_v when set); must not overlap Q, K or V. */
  float* lse;    /* Optional log-sum-exp (natural log) of the scaled, masked scores,
                    [batch, heads_q, seqlen_q]; -inf for a row that sees no key. May be null. */

  flash_dtype dtype; /* Element type of Q, K, V and O (K and V: see kv_dtype). */

  int64_t batch;    /* Number of independent sequences. */
  int64_t seqlen_q; /* Query rows per sequence. */
  int64_t seqlen_k; /* Key/value rows per sequence. */
  int64_t heads_q;  /* Query heads; a multiple of heads_kv. */
  int64_t heads_kv; /* Key/value heads (== heads_q: MHA, 1: MQA, otherwise GQA). */
  /* A multiple of 8 from 8 to 256 (or 512 with head_dim_v 0 or 512: the
   * split-D decode kernel; or 576 with head_dim_v 512: MLA, see
   * head_dim_v); one not compiled (FLASH_HEAD_DIMS: 32, 64,
   * 96, 128, 192, 256) runs on the next compiled one, at its cost. */
  int64_t head_dim;

  int64_t q_batch_stride; /* Elements between Q[b, i, h, :] and Q[b + 1, i, h, :]. */
  int64_t q_seq_stride;   /* Elements between Q[b, i, h, :] and Q[b, i + 1, h, :]. */
  int64_t q_head_stride;  /* Elements between Q[b, i, h, :] and Q[b, i, h + 1, :]. */
  int64_t k_batch_stride; /* Elements between K[b, j, h, :] and K[b + 1, j, h, :]. */
  int64_t k_seq_stride;   /* Elements between K[b, j, h, :] and K[b, j + 1, h, :]. */
  int64_t k_head_stride;  /* Elements between K[b, j, h, :] and K[b, j, h + 1, :]. */
  int64_t v_batch_stride; /* Elements between V[b, j, h, :] and V[b + 1, j, h, :]. */
  int64_t v_seq_stride;   /* Elements between V[b, j, h, :] and V[b, j + 1, h, :]. */
  int64_t v_head_stride;  /* Elements between V[b, j, h, :] and V[b, j, h + 1, :]. */
  int64_t o_batch_stride; /* Elements between O[b, i, h, :] and O[b + 1, i, h, :]. */
  int64_t o_seq_stride;   /* Elements between O[b, i, h, :] and O[b, i + 1, h, :]. */
  int64_t o_head_stride;  /* Elements between O[b, i, h, :] and O[b, i, h + 1, :]. */
  int64_t q_dim_stride;   /* Stride of the last dimension of Q, K, V and O; must be 1. */
  int64_t k_dim_stride;
  int64_t v_dim_stride;
  int64_t o_dim_stride;

  /* Causal mask aligned to the bottom-right corner: query row i sees key j
   * iff j <= i + seqlen_k - seqlen_q. A row that sees no key outputs zeros. */
  bool causal;
  /* Multiplies Q K^T before the softmax; 0 means 1 / sqrt(head_dim). Must be
   * in [0, 1e24]: the kernels fold softmax_scale * log2(e) into one float32
   * and multiply raw scores by it, and up to 1e24 that product stays finite
   * for every score fp16 inputs can give (|q.k| < 2^40 at head_dim <= 256)
   * and for bf16 scores up to 1e14 in magnitude. */
  float softmax_scale;
  /* Kernel family; leave at FLASH_BACKEND_AUTO unless testing or comparing
   * paths. A forced backend that cannot run the call returns FLASH_UNSUPPORTED. */
  flash_backend backend;
  /* Autotuning, 0 or 1 (see README, "Autotuning"): when 1, or when the
   * environment sets FLASH_AUTOTUNE=1, the first call for a shape class times
   * every compiled configuration (on scratch outputs, synchronising the
   * stream) and later calls of that class use the fastest. 0 by default: the
   * built-in heuristic needs no warm-up. Any nonzero value counts as 1. */
  int autotune;

  /* ---- Inference-engine features. All optional: flash_attention_params_init
   * turns them off. The fields and their meaning are those of
   * flash::AttentionParams (flash/flash.hpp), which says more. ---- */

  /* Variable-length query batches: when non-null, Q and O are packed
   * [total_q, heads_q, head_dim] (q/o_batch_stride ignored) and sequence b
   * owns rows cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1. Device memory, batch + 1
   * entries, starting at 0, non-decreasing. seqlen_q is then max_seqlen_q. LSE,
   * if requested, is [heads_q, total_q]. */
  const int32_t* cu_seqlens_q;
  /* Variable-length key batches: K and V packed [total_k, heads_kv, head_dim]
   * the same way (k/v_batch_stride ignored). Not together with block_table. */
  const int32_t* cu_seqlens_k;
  /* Keys used per sequence (device, batch entries): sequence b attends to its
   * first seqused_k[b] keys of the dense or paged K/V allocation. */
  const int32_t* seqused_k;
  /* Paged KV cache: when block_table is non-null, K and V are
   * [num_pages, page_size, heads_kv, head_dim] (k/v_batch_stride: the stride
   * between pages) and key j of sequence b lives in page
   * block_table[b * block_table_batch_stride + j / page_size], row
   * j % page_size. Device memory; page_size any positive number of keys.
   * Every entry for keys below a sequence's length must be in
   * [0, num_pages) (flash.hpp says more); another value there is undefined
   * behaviour (wrong output, or a memory fault). */
  const int32_t* block_table;
  int64_t block_table_batch_stride; /* int32 entries between sequences' rows of block_table */
  int64_t max_pages_per_seq;        /* entries per row of block_table */
  int64_t page_size;                /* keys per page */
  int64_t num_pages;                /* pages in K and V */

  /* Sliding window relative to the bottom-right diagonal: query row i sees
   * key j iff i + d - window_left <= j <= i + d + window_right, with
   * d = seqlen_k - seqlen_q; -1 (the default) leaves that side unbounded.
   * K and V rows below a sequence's length must be finite also outside the
   * window: partly visible blocks are loaded whole and masked, and 0 times
   * a NaN or infinite V is NaN. */
  int64_t window_left;
  int64_t window_right;
  /* Logit softcap: when > 0, scores become softcap * tanh(score / softcap)
   * before masking and the softmax. 0 (the default) turns it off; otherwise
   * in [1e-6, 1e6] (softcap * log2(e) is folded into float32; up to 1e6 its
   * rounding stays below 2^-4 in exp2 units, so capped scores never overflow). */
  float softcap;

  /* Split-KV, on every kernel: 0 lets flash choose (as many splits as the
   * workspace holds, up to its choice; none without one; its choice keeps
   * each float32 accumulation within 2^18 keys where 128 splits (and, on
   * the prefill kernels, 1 GiB of partial results) allow), 1 never splits,
   * n > 1 asks for n (at most 128), and then the workspace (device memory,
   * 256-byte aligned) must hold at least flash_attention_workspace_size()
   * bytes. */
  int32_t num_splits;
  void* workspace;
  size_t workspace_bytes;

  /* Rows of the packed (varlen) tensors: total_q = cu_seqlens_q[batch],
   * total_k = cu_seqlens_k[batch]. Optional (0, the default: not given), but
   * the Hopper kernel needs them to describe packed tensors to TMA: varlen
   * calls without them run the sm80 kernel (FLASH_BACKEND_SM90 returns
   * FLASH_UNSUPPORTED). When given they must be exact; never negative. */
  int64_t total_q;
  int64_t total_k;

  /* Attention sinks (gpt-oss): null (the default), or device memory holding
   * heads_q float32 logits, one per query head, in the units of the scaled
   * (and capped) scores. Each row's softmax gains exp(sinks[h]) in its
   * denominator and nothing in O; the LSE includes it (a row that sees no
   * key: O = 0, LSE = sinks[h]). -inf turns a head's sink off; values must
   * be finite or -inf. Every kernel, mask and layout takes them. */
  const float* sinks;
  /* ALiBi: null (the default), or device memory holding heads_q float32
   * slopes, one per query head: the score of query row i and key j of a
   * sequence gains -alibi_slopes[h] * |i + d - j| (d = seqlen_k - seqlen_q
   * of that sequence), in the units of the scaled (and capped) scores,
   * before masking and the softmax. */
  const float* alibi_slopes;

  /* Width of V and O (DeepSeek-V2/V3 prefill: head_dim 192, head_dim_v
   * 128); 0 (the default) means head_dim. The same rule as head_dim; the
   * call runs on the kernel of the wider of the two. With it, V is
   * [batch, seqlen_k, heads_kv, head_dim_v] and O [batch, seqlen_q, heads_q,
   * head_dim_v] (packed and paged layouts alike). MLA's absorbed form,
   * head_dim 576 with head_dim_v 512, requires v to be k with k's strides
   * (V is the first 512 columns of K's rows; flash_set_contiguous_* set them
   * so) and a nonzero softmax_scale (otherwise
   * FLASH_INVALID_ARGUMENT): the Hopper MLA kernel on sm_90, the
   * split-D decode kernel elsewhere; not with an fp8 cache or k_new. */
  int64_t head_dim_v;

  /* Append and attend (FlashAttention-2's KV-cache path; flash.hpp's
   * AttentionParams says it in full). With k_new non-null, each sequence's
   * new rows of k_new / v_new ([batch, seqlen_new, heads_kv, head_dim] and
   * [..., head_dim_v or head_dim], or packed [total_new, ...] with
   * cu_seqlens_k_new) are written into the cache K and V (dense or paged)
   * at rows seqused_k[b] onwards (seqused_k required: the lengths before
   * the append; not written), and the call attends over the cache with
   * them. Rows past the cache's allocation are dropped. Needs a workspace
   * of flash_attention_workspace_size() bytes. K's and V's rows must not
   * share memory (they may interleave with the same strides), and no
   * output may overlap what the append reads. */
  const void* k_new;
  const void* v_new;
  int64_t seqlen_new;
  const int32_t* cu_seqlens_k_new;
  /* k_new's and v_new's strides, in elements (as q's). */
  int64_t k_new_batch_stride;
  int64_t k_new_seq_stride;
  int64_t k_new_head_stride;
  int64_t v_new_batch_stride;
  int64_t v_new_seq_stride;
  int64_t v_new_head_stride;
  /* Rotary embedding of the new key rows and of Q, with k_new only: device
   * float32 cos and sin tables [rotary_positions, rotary_dim / 2]; key row
   * t of sequence b at position seqused_k[b] + t, query row i at
   * (its keys after the append) - (its query rows) + i. rotary_interleaved
   * nonzero: pairs (2j, 2j+1) (GPT-J); 0: (j, j + rotary_dim / 2)
   * (GPT-NeoX, Llama). rotary_dim is even, 2 .. head_dim (the first
   * rotary_dim columns turn); rotary_positions, 1 .. 2^30, is the tables'
   * row count: positions must be below it (a larger one reads the last
   * row). */
  const float* rotary_cos;
  const float* rotary_sin;
  int64_t rotary_dim;
  int64_t rotary_positions;
  int64_t rotary_interleaved;

  /* FP8 KV cache (flash.hpp's AttentionParams says it in full). With
   * kv_dtype FLASH_KV_DTYPE_FLOAT8_E4M3, K and V hold one-byte e4m3
   * elements (strides still count elements) standing for
   *   K = k_descale[h * descale_head_stride] * K_fp8,  V = v_descale[...] * V_fp8
   * for K/V head h; Q and O keep dtype. k_descale and v_descale are device
   * float32, or null for 1 (read by the kernel: a captured graph sees new
   * values); descale_head_stride is 0 (one factor for all heads) or 1 (one
   * per K/V head, heads_kv entries). Such calls run on the decode kernel
   * (FLASH_BACKEND_DECODE, any seqlen_q) or, unsplit, on the Hopper kernel
   * (FLASH_BACKEND_SM90); FLASH_BACKEND_AUTO takes the Hopper kernel for
   * calls of more than 16 queries it does not split, the decode kernel for
   * the others; FLASH_BACKEND_SM80 refuses them. head_dim and
   * head_dim_v must be multiples of 16 and the K/V strides multiples of 16
   * elements. With k_new the new rows (in dtype) are stored as
   * e4m3(x / descale) of their K/V head, rounded to nearest and saturated
   * at +-448 (keys rotated first). FLASH_KV_DTYPE_SAME (the default) takes
   * null descales and descale_head_stride 0. */
  flash_kv_dtype kv_dtype;
  const float* k_descale;
  const float* v_descale;
  int64_t descale_head_stride;

  /* FP8 prefill (flash.hpp's AttentionParams says it in full). With q_dtype
   * FLASH_KV_DTYPE_FLOAT8_E4M3 and kv_dtype FLASH_KV_DTYPE_FLOAT8_E4M3, Q
   * holds e4m3 too, standing for q_descale[h * descale_head_stride] * Q_fp8
   * (h the K/V head; null: 1), and both products run on e4m3 tensor cores;
   * O is dtype's (bf16 or fp16). Hopper only (FLASH_BACKEND_AUTO or
   * FLASH_BACKEND_SM90); head_dim 64, 128 or 256 with head_dim_v 0 or the
   * same; dense or varlen (with total_q and total_k); no mask, causal or a
   * sliding window; lse and sinks. Needs a workspace of
   * flash_attention_workspace_size() bytes (V transposed). FLASH_KV_DTYPE_SAME (the default) takes a null
   * q_descale. */
  flash_kv_dtype q_dtype;
  const float* q_descale;
} flash_attention_params;

/* Sets struct_size to `struct_size` and every field within the first
 * struct_size bytes to its default, as the C++ AttentionParams{}: null
 * pointers, zero sizes and strides, dim strides 1, bf16, not causal,
 * softmax_scale 0 (1/sqrt(head_dim)), FLASH_BACKEND_AUTO, autotune 0; the
 * inference-engine fields off (null pointers, zero sizes, window_left and
 * window_right -1, softcap 0, num_splits 0, no workspace, total_q and
 * total_k 0, no sinks, no ALiBi, head_dim_v 0, no append, no rotary,
 * kv_dtype FLASH_KV_DTYPE_SAME with null descales and descale_head_stride
 * 0, q_dtype FLASH_KV_DTYPE_SAME with a null q_descale); padding zeroed. Writes nothing past struct_size bytes, and
 * when struct_size is not one the library accepts (see
 * flash_attention_params) only struct_size itself (nothing if it is below
 * sizeof(size_t)), which the other calls then reject. A null `params` is
 * ignored. C and C++ callers use flash_attention_params_init; this is for
 * bindings that declare the struct themselves (pass their own sizeof). */
void flash_attention_params_init_sized(flash_attention_params* params, size_t struct_size) FLASH_C_NOEXCEPT;

/* flash_attention_params_init_sized(params, sizeof(flash_attention_params)),
 * with the size of the struct this file declares: the caller's. */
static inline void flash_attention_params_init(flash_attention_params* params) FLASH_C_NOEXCEPT {
  flash_attention_params_init_sized(params, sizeof(flash_attention_params));
}

/* Fill all strides for densely packed [batch, seq, heads, head_dim] tensors
 * (V and O: head_dim_v when set) from the sizes already set. A null `params`, or one whose struct_size the
 * library does not accept, is left alone (flash_validate says why). */
void flash_set_contiguous_bnhd(flash_attention_params* params) FLASH_C_NOEXCEPT;
/* Fill all strides for densely packed [batch, heads, seq, head_dim] tensors
 * (V and O: head_dim_v when set) from the sizes already set. A null `params`, or one whose struct_size the
 * library does not accept, is left alone (flash_validate says why). */
void flash_set_contiguous_bhnd(flash_attention_params* params) FLASH_C_NOEXCEPT;

/* Checks every argument without touching the GPU. Its answer is the call's:
 * FLASH_SUCCESS means flash_attention_forward will not return
 * FLASH_INVALID_ARGUMENT (it may still report FLASH_UNSUPPORTED or
 * FLASH_CUDA_ERROR for the build and device it runs on); a rejection is
 * flash_attention_forward's own. A null `params`, or a struct_size the
 * library does not accept, is FLASH_INVALID_ARGUMENT. */
flash_status_code flash_validate(const flash_attention_params* params) FLASH_C_NOEXCEPT;

/* Computes attention asynchronously on `stream` (a cudaStream_t; null: the
 * legacy default stream) on the current device. No allocation, no host
 * synchronisation, so a call can be captured in a CUDA graph; thread-safe;
 * deterministic. A rejected call (including a null `params` or a struct_size
 * the library does not accept) launches nothing and writes nothing. (With
 * k_new, an error the CUDA launch itself reports after the append leaves the
 * new rows written; repeating the call writes the same rows again.) */
flash_status_code flash_attention_forward(const flash_attention_params* params, void* stream) FLASH_C_NOEXCEPT;

/* Bytes of device workspace flash_attention_forward needs for `params` on the
 * current device, written to *bytes: nonzero when it would split the keys
 * (few query tiles for the GPU, or more than 2^18 keys), always with k_new
 * (the lengths after the append, the rotated Q) and always for the FP8
 * prefill (V transposed). Pass a buffer of at least this size as
 * params->workspace. Launches nothing. A null `params` or
 * `bytes`, or a struct_size the library does not accept, is
 * FLASH_INVALID_ARGUMENT; on any failure *bytes (when not null) is 0. */
flash_status_code flash_attention_workspace_size(const flash_attention_params* params,
                                                 size_t* bytes) FLASH_C_NOEXCEPT;

/* Arguments of one merge: n partial results of attention for the same
 * queries over disjoint key sets (a shared prefix and a suffix in cascade
 * attention; one K/V slice each in context parallelism), each an O and its
 * LSE as flash_attention_forward writes them, merge into the result over all
 * the keys:
 *   LSE = log sum_s exp(LSE_s),  O = sum_s exp(LSE_s - LSE) O_s.
 * Shapes, in elements:
 *   O_s, O : [batch, seqlen_q, heads, head_dim], own strides (last dim contiguous)
 *   LSE_s  : [batch, heads, seqlen_q], float32, contiguous (flash_attention_forward's layout)
 *   LSE    : the same layout; optional
 * State s's O starts at o_states + s * o_state_stride elements, its LSE at
 * lse_states + s * lse_state_stride floats. A row whose every LSE_s is -inf
 * (no key in any state) gets O = 0 and LSE = -inf. The states are summed in
 * a fixed order: the result is deterministic. In place: O (and LSE) may be
 * one of the states (the same address and strides); otherwise the output
 * must not overlap any state. The sums run in float32; O is rounded once.
 * Start from flash_merge_params_init(), then call flash_merge_set_contiguous()
 * to fill the strides of densely packed tensors and states.
 *
 * The struct grows as flash_attention_params does (see there), with its own
 * struct_size, set by flash_merge_params_init: the library reads only the
 * fields within the caller's struct_size bytes and gives the rest their
 * defaults. Accepted: a multiple of 8 from the end of o_head_stride (the
 * required fields; the optional lse may be left out) up to the library's own
 * sizeof(flash_merge_params); every call that takes the struct rejects
 * anything else with FLASH_INVALID_ARGUMENT and a message saying which. */
typedef struct flash_merge_params {
  size_t struct_size; /* Bytes of this struct as the caller compiled it; set by flash_merge_params_init. */

  flash_dtype dtype;  /* Element type of the O_s and of O. */
  int64_t num_states; /* n, 1 to 128. */
  int64_t batch;      /* Number of independent sequences. */
  int64_t seqlen_q;   /* Query rows per sequence. */
  int64_t heads;      /* Query heads. */
  int64_t head_dim;   /* A multiple of 8 from 8 to 256. */

  const void* o_states;          /* State 0's O, [batch, seqlen_q, heads, head_dim]. */
  int64_t o_state_stride;        /* Elements from state s's O to state s + 1's. */
  int64_t o_states_batch_stride; /* Elements between O_s[b, i, h, :] and O_s[b + 1, i, h, :]. */
  int64_t o_states_seq_stride;   /* Elements between O_s[b, i, h, :] and O_s[b, i + 1, h, :]. */
  int64_t o_states_head_stride;  /* Elements between O_s[b, i, h, :] and O_s[b, i, h + 1, :]. */
  const float* lse_states;       /* State 0's LSE, [batch, heads, seqlen_q]. */
  int64_t lse_state_stride;      /* Floats from state s's LSE to state s + 1's. */

  void* o;                /* The merged O, [batch, seqlen_q, heads, head_dim]. */
  int64_t o_batch_stride; /* Elements between O[b, i, h, :] and O[b + 1, i, h, :]. */
  int64_t o_seq_stride;   /* Elements between O[b, i, h, :] and O[b, i + 1, h, :]. */
  int64_t o_head_stride;  /* Elements between O[b, i, h, :] and O[b, i, h + 1, :]. */

  float* lse; /* The merged LSE, [batch, heads, seqlen_q]; optional (may be null). */
} flash_merge_params;

/* Sets struct_size to `struct_size` and every field within the first
 * struct_size bytes to its default, as the C++ MergeParams{}: null
 * pointers, zero sizes and strides, bf16; padding zeroed. Writes nothing
 * past struct_size bytes, and when struct_size is not one the library
 * accepts (see flash_merge_params) only struct_size itself (nothing if it is
 * below sizeof(size_t)), which the other calls then reject. A null `params`
 * is ignored. C and C++ callers use flash_merge_params_init; this is for
 * bindings that declare the struct themselves (pass their own sizeof). */
void flash_merge_params_init_sized(flash_merge_params* params, size_t struct_size) FLASH_C_NOEXCEPT;

/* flash_merge_params_init_sized(params, sizeof(flash_merge_params)), with
 * the size of the struct this file declares: the caller's. */
static inline void flash_merge_params_init(flash_merge_params* params) FLASH_C_NOEXCEPT {
  flash_merge_params_init_sized(params, sizeof(flash_merge_params));
}

/* Fill all strides from the sizes already set: densely packed
 * [batch, seqlen_q, heads, head_dim] tensors for O and every state, and the
 * states packed one after the other (O_s and LSE_s alike). A null `params`,
 * or one whose struct_size the library does not accept, is left alone
 * (flash_validate_merge says why). */
void flash_merge_set_contiguous(flash_merge_params* params) FLASH_C_NOEXCEPT;

/* Checks every argument without touching the GPU. Its answer is the call's:
 * FLASH_SUCCESS means flash_merge_states will not return
 * FLASH_INVALID_ARGUMENT (it may still report FLASH_UNSUPPORTED or
 * FLASH_CUDA_ERROR for the build and device it runs on); a rejection is
 * flash_merge_states's own. A null `params`, or a struct_size the library
 * does not accept, is FLASH_INVALID_ARGUMENT. */
flash_status_code flash_validate_merge(const flash_merge_params* params) FLASH_C_NOEXCEPT;

/* Merges asynchronously on `stream` (a cudaStream_t; null: the legacy
 * default stream) on the current device: one kernel, no allocation, no host
 * synchronisation, so a call can be captured in a CUDA graph; thread-safe;
 * deterministic. A rejected call (including a null `params` or a struct_size
 * the library does not accept) launches nothing and writes nothing. The
 * split-KV combine inside flash_attention_forward is the same merge. */
flash_status_code flash_merge_states(const flash_merge_params* params, void* stream) FLASH_C_NOEXCEPT;

/* The message of this thread's last flash_validate, flash_attention_forward,
 * flash_attention_workspace_size, flash_validate_merge or flash_merge_states:
 * what was wrong and what would be accepted, or "" after a success. Never
 * null. The string belongs to the library and stays valid and unchanged
 * until the next flash call on the same thread; other threads have their
 * own. */
const char* flash_last_error_message(void) FLASH_C_NOEXCEPT;

/* A static name for a status code: "success", "invalid argument",
 * "unsupported", "CUDA error", or "unknown status code". Never null. */
const char* flash_status_string(flash_status_code code) FLASH_C_NOEXCEPT;

/* Version of the linked library, "major.minor.patch" (FLASH_VERSION_STRING
 * of the headers it was built with). */
const char* flash_version(void) FLASH_C_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#undef FLASH_C_NOEXCEPT

#endif /* FLASH_FLASH_H_ */
