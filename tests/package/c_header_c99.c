/* Compiled, never run, by the package.c_header_* tests: flash/flash.h must
 * be plain C99 (gcc -std=c99 -Wall -Wextra -Werror -pedantic) and also valid
 * C++. Uses every type and function of the C API so each declaration is
 * checked. */
#include <stdio.h>

#include "flash/flash.h"

#if !defined(FLASH_VERSION_MAJOR) || !defined(FLASH_VERSION_MINOR) || !defined(FLASH_VERSION_PATCH)
#error "flash/flash.h must provide the version macros"
#endif
#if FLASH_VERSION != FLASH_VERSION_MAJOR * 10000 + FLASH_VERSION_MINOR * 100 + FLASH_VERSION_PATCH
#error "FLASH_VERSION must be usable in #if and agree with its parts"
#endif

int flash_c_header_check(void* q, void* k, void* v, void* o, float* lse, void* stream);

int flash_c_header_check(void* q, void* k, void* v, void* o, float* lse, void* stream) {
  flash_attention_params p;
  flash_status_code status;
  flash_dtype dtype = FLASH_DTYPE_FLOAT16;
  flash_backend backend = FLASH_BACKEND_SM80;
  size_t workspace_bytes = 0;

  flash_attention_params_init_sized(&p, sizeof(p));
  flash_attention_params_init(&p);
  if (p.struct_size != sizeof(flash_attention_params)) return -1;
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.lse = lse;
  p.dtype = dtype;
  p.backend = backend;
  p.batch = 1;
  p.seqlen_q = p.seqlen_k = 128;
  p.heads_q = p.heads_kv = 4;
  p.head_dim = 64;
  p.causal = true;
  p.softmax_scale = 0.125f;
  p.autotune = 1;
  flash_set_contiguous_bhnd(&p);
  flash_set_contiguous_bnhd(&p);
  /* The inference-engine fields, at their defaults (off). */
  p.cu_seqlens_q = NULL;
  p.cu_seqlens_k = NULL;
  p.total_q = 0;
  p.total_k = 0;
  p.seqused_k = NULL;
  p.block_table = NULL;
  p.block_table_batch_stride = 0;
  p.max_pages_per_seq = 0;
  p.page_size = 0;
  p.num_pages = 0;
  p.window_left = -1;
  p.window_right = -1;
  p.softcap = 0.0f;
  p.num_splits = 0;
  p.workspace = NULL;
  p.workspace_bytes = 0;
  if (flash_attention_workspace_size(&p, &workspace_bytes) != FLASH_SUCCESS) workspace_bytes = 0;
  if (workspace_bytes > 0) backend = FLASH_BACKEND_DECODE;
  p.backend = backend;
  status = flash_validate(&p);
  if (status == FLASH_SUCCESS) status = flash_attention_forward(&p, stream);
  if (status == FLASH_INVALID_ARGUMENT || status == FLASH_UNSUPPORTED || status == FLASH_CUDA_ERROR) {
    fprintf(stderr, "flash %s (%s): %s: %s\n", flash_version(), FLASH_VERSION_STRING, flash_status_string(status),
            flash_last_error_message());
  }
  return (int)status;
}
