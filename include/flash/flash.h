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
 * Every function is thread-safe. None throws, exits or prints. */
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

/* Which kernel family runs a call. */
typedef enum flash_backend {
  FLASH_BACKEND_AUTO = 0, /* the Hopper kernel on sm_90 where it supports the shape, else the sm80 kernel */
  FLASH_BACKEND_SM80 = 1, /* the FlashAttention-2 mma.sync kernel (sm_80 and newer) */
  FLASH_BACKEND_SM90 = 2  /* the Hopper wgmma/TMA kernel (sm_90 with an sm_90a build; head_dim 64, 128, 256) */
} flash_backend;

/* The result of a call; flash_last_error_message() says more. */
typedef enum flash_status_code {
  FLASH_SUCCESS = 0,
  FLASH_INVALID_ARGUMENT = 1, /* the call was rejected; nothing was launched or written */
  FLASH_UNSUPPORTED = 2,      /* valid, but not supported by this build or this GPU */
  FLASH_CUDA_ERROR = 3        /* the CUDA runtime reported an error */
} flash_status_code;

/* Arguments of one attention call. Shapes, in elements:
 *   Q, O : [batch, seqlen_q, heads_q,  head_dim]
 *   K, V : [batch, seqlen_k, heads_kv, head_dim]
 *   LSE  : [batch, heads_q, seqlen_q], float32, contiguous
 * Each tensor has its own batch, sequence and head strides (in elements, not
 * bytes); the last dimension must be contiguous (stride 1). So both the
 * [B, N, H, D] layout of inference engines and the [B, H, N, D] layout work
 * without copies. Start from flash_attention_params_init(), then call
 * flash_set_contiguous_bnhd() or flash_set_contiguous_bhnd() to fill the
 * strides of densely packed tensors. */
typedef struct flash_attention_params {
  const void* q; /* Query, [batch, seqlen_q, heads_q, head_dim]. */
  const void* k; /* Key, [batch, seqlen_k, heads_kv, head_dim]. */
  const void* v; /* Value, [batch, seqlen_k, heads_kv, head_dim]. */
  void* o;       /* Output, [batch, seqlen_q, heads_q, head_dim]; must not overlap Q, K or V. */
  float* lse;    /* Optional log-sum-exp (natural log) of the scaled, masked scores,
                    [batch, heads_q, seqlen_q]; -inf for a row that sees no key. May be null. */

  flash_dtype dtype; /* Element type of Q, K, V and O. */

  int64_t batch;    /* Number of independent sequences. */
  int64_t seqlen_q; /* Query rows per sequence. */
  int64_t seqlen_k; /* Key/value rows per sequence. */
  int64_t heads_q;  /* Query heads; a multiple of heads_kv. */
  int64_t heads_kv; /* Key/value heads (== heads_q: MHA, 1: MQA, otherwise GQA). */
  int64_t head_dim; /* 32, 64, 96, 128 or 256. */

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
  /* Multiplies Q K^T before the softmax; must be >= 0, and 0 means 1 / sqrt(head_dim). */
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
} flash_attention_params;

/* Sets every field to its default, as the C++ AttentionParams{}: null
 * pointers, zero sizes and strides, dim strides 1, bf16, not causal,
 * softmax_scale 0 (1/sqrt(head_dim)), FLASH_BACKEND_AUTO, autotune 0. A null
 * `params` is ignored. */
void flash_attention_params_init(flash_attention_params* params) FLASH_C_NOEXCEPT;

/* Fill all strides for densely packed [batch, seq, heads, head_dim] tensors
 * from the sizes already set. A null `params` is ignored. */
void flash_set_contiguous_bnhd(flash_attention_params* params) FLASH_C_NOEXCEPT;
/* Fill all strides for densely packed [batch, heads, seq, head_dim] tensors
 * from the sizes already set. A null `params` is ignored. */
void flash_set_contiguous_bhnd(flash_attention_params* params) FLASH_C_NOEXCEPT;

/* Checks every argument without touching the GPU. Returns FLASH_SUCCESS when
 * flash_attention_forward would accept the call (it may still report
 * FLASH_UNSUPPORTED or FLASH_CUDA_ERROR for the device it runs on). A null
 * `params` is FLASH_INVALID_ARGUMENT. */
flash_status_code flash_validate(const flash_attention_params* params) FLASH_C_NOEXCEPT;

/* Computes attention asynchronously on `stream` (a cudaStream_t; null: the
 * legacy default stream) on the current device. No allocation, no host
 * synchronisation, so a call can be captured in a CUDA graph; thread-safe;
 * deterministic. A rejected call (including a null `params`) launches
 * nothing and writes nothing. */
flash_status_code flash_attention_forward(const flash_attention_params* params, void* stream) FLASH_C_NOEXCEPT;

/* The message of this thread's last flash_validate or flash_attention_forward:
 * what was wrong and what would be accepted, or "" after a success. Never
 * null. The string belongs to the library and stays valid and unchanged until
 * the next flash call on the same thread; other threads have their own. */
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
