/* attention_c: flash from plain C99, through flash/flash.h.
 *
 * Grouped-query causal attention with seqlen_q != seqlen_k (a chunk of 300
 * new queries attending to 500 keys, the last 300 of which are the chunk
 * itself), in the [batch, heads, seq, head_dim] layout, bf16, with the
 * log-sum-exp output. It shows how a rejected call reads, runs the real one
 * on a stream, and checks a few rows (output and LSE) against a float64
 * computation on the host.
 *
 * Build: part of the flash CMake project (target attention_c, C99, links
 * only flash::flash). Run: ./attention_c
 * Exit codes: 0 success, 1 an error or a result out of tolerance,
 * 77 no CUDA device (the conventional "skipped" code of test drivers). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flash/flash.h"

enum { kBatch = 1, kSeqlenQ = 300, kSeqlenK = 500, kHeadsQ = 8, kHeadsKv = 2, kHeadDim = 64 };

/* bf16 is the upper half of a float32; round to nearest even. */
static uint16_t float_to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static float bf16_to_float(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float result;
  memcpy(&result, &bits, sizeof(result));
  return result;
}

/* Uniform in [-1, 1) from a 64-bit linear congruential generator. */
static float next_uniform(uint64_t* state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* Offset of element [b, h, n, 0] of a dense [B, H, N, D] tensor. */
static size_t bhnd(int b, int h, int n, int heads, int seqlen) {
  return (((size_t)b * heads + h) * seqlen + n) * kHeadDim;
}

/* O[b, h, i, :] and LSE[b, h, i] in float64, with flash's conventions:
 * scale 1/sqrt(D), causal mask aligned to the bottom-right corner (key j
 * visible from query i iff j <= i + seqlen_k - seqlen_q), query head h
 * reading K/V head h / (heads_q / heads_kv). */
static double reference_row(const uint16_t* q, const uint16_t* k, const uint16_t* v, int b, int h, int i, double* out) {
  const int h_kv = h / (kHeadsQ / kHeadsKv);
  const int visible = i + kSeqlenK - kSeqlenQ + 1;
  const double scale = 1.0 / sqrt((double)kHeadDim);
  double scores[kSeqlenK];
  double max_score = -INFINITY, sum = 0.0;
  int j, d;
  for (j = 0; j < visible; ++j) {
    double dot = 0.0;
    for (d = 0; d < kHeadDim; ++d) {
      dot += (double)bf16_to_float(q[bhnd(b, h, i, kHeadsQ, kSeqlenQ) + d]) *
             (double)bf16_to_float(k[bhnd(b, h_kv, j, kHeadsKv, kSeqlenK) + d]);
    }
    scores[j] = dot * scale;
    if (scores[j] > max_score) max_score = scores[j];
  }
  for (d = 0; d < kHeadDim; ++d) out[d] = 0.0;
  for (j = 0; j < visible; ++j) {
    const double p = exp(scores[j] - max_score);
    sum += p;
    for (d = 0; d < kHeadDim; ++d) out[d] += p * (double)bf16_to_float(v[bhnd(b, h_kv, j, kHeadsKv, kSeqlenK) + d]);
  }
  for (d = 0; d < kHeadDim; ++d) out[d] /= sum;
  return max_score + log(sum);
}

/* Prints the failing CUDA call and returns 0. */
static int cuda_ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return 1;
  fprintf(stderr, "%s failed: %s\n", what, cudaGetErrorString(err));
  return 0;
}

int main(void) {
  const size_t q_elems = (size_t)kBatch * kHeadsQ * kSeqlenQ * kHeadDim;
  const size_t kv_elems = (size_t)kBatch * kHeadsKv * kSeqlenK * kHeadDim;
  const size_t lse_elems = (size_t)kBatch * kHeadsQ * kSeqlenQ;
  uint16_t *h_q = NULL, *h_k = NULL, *h_v = NULL, *h_o = NULL;
  float* h_lse = NULL;
  void *d_q = NULL, *d_k = NULL, *d_v = NULL, *d_o = NULL, *d_lse = NULL;
  cudaStream_t stream = NULL;
  flash_attention_params params;
  flash_status_code status;
  uint64_t rng = 2024;
  size_t n;
  int device_count = 0, ok, exit_code = 1;

  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  printf("flash %s (C API, headers %s)\n", flash_version(), FLASH_VERSION_STRING);

  h_q = malloc(q_elems * sizeof(uint16_t));
  h_k = malloc(kv_elems * sizeof(uint16_t));
  h_v = malloc(kv_elems * sizeof(uint16_t));
  h_o = malloc(q_elems * sizeof(uint16_t));
  h_lse = malloc(lse_elems * sizeof(float));
  ok = h_q && h_k && h_v && h_o && h_lse;
  if (!ok) fprintf(stderr, "out of host memory\n");
  for (n = 0; ok && n < q_elems; ++n) h_q[n] = float_to_bf16(next_uniform(&rng));
  for (n = 0; ok && n < kv_elems; ++n) h_k[n] = float_to_bf16(next_uniform(&rng));
  for (n = 0; ok && n < kv_elems; ++n) h_v[n] = float_to_bf16(next_uniform(&rng));

  /* cudaMalloc returns 256-byte-aligned memory; flash needs 16-byte
   * alignment and strides that are multiples of 8 elements. */
  ok = ok && cuda_ok(cudaMalloc(&d_q, q_elems * 2), "cudaMalloc(Q)") &&
       cuda_ok(cudaMalloc(&d_k, kv_elems * 2), "cudaMalloc(K)") &&
       cuda_ok(cudaMalloc(&d_v, kv_elems * 2), "cudaMalloc(V)") &&
       cuda_ok(cudaMalloc(&d_o, q_elems * 2), "cudaMalloc(O)") &&
       cuda_ok(cudaMalloc(&d_lse, lse_elems * sizeof(float)), "cudaMalloc(LSE)") &&
       cuda_ok(cudaStreamCreate(&stream), "cudaStreamCreate") &&
       cuda_ok(cudaMemcpyAsync(d_q, h_q, q_elems * 2, cudaMemcpyHostToDevice, stream), "copy Q") &&
       cuda_ok(cudaMemcpyAsync(d_k, h_k, kv_elems * 2, cudaMemcpyHostToDevice, stream), "copy K") &&
       cuda_ok(cudaMemcpyAsync(d_v, h_v, kv_elems * 2, cudaMemcpyHostToDevice, stream), "copy V");

  if (ok) {
    /* Always start from the defaults: they set the last-dimension strides
     * to 1 and softmax_scale to 0 (1/sqrt(head_dim)). */
    flash_attention_params_init(&params);
    params.q = d_q;
    params.k = d_k;
    params.v = d_v;
    params.o = d_o;
    params.lse = d_lse;
    params.dtype = FLASH_DTYPE_BFLOAT16;
    params.batch = kBatch;
    params.seqlen_q = kSeqlenQ;
    params.seqlen_k = kSeqlenK;
    params.heads_q = kHeadsQ;
    params.heads_kv = kHeadsKv;
    params.causal = true;

    /* A rejected call returns a code; the message says what was wrong. */
    params.head_dim = 84; /* not a multiple of 8 */
    flash_set_contiguous_bhnd(&params);
    status = flash_validate(&params);
    printf("head_dim 84 -> %s: %s\n", flash_status_string(status), flash_last_error_message());

    params.head_dim = kHeadDim;
    flash_set_contiguous_bhnd(&params);
    /* Asynchronous: queues the kernel on `stream` and returns. */
    status = flash_attention_forward(&params, stream);
    if (status != FLASH_SUCCESS) {
      fprintf(stderr, "flash_attention_forward failed (%s): %s\n", flash_status_string(status),
              flash_last_error_message());
      ok = 0;
    }
  }
  /* Errors during the kernel's execution surface at the synchronisation. */
  ok = ok && cuda_ok(cudaStreamSynchronize(stream), "cudaStreamSynchronize") &&
       cuda_ok(cudaMemcpy(h_o, d_o, q_elems * 2, cudaMemcpyDeviceToHost), "copy O") &&
       cuda_ok(cudaMemcpy(h_lse, d_lse, lse_elems * sizeof(float), cudaMemcpyDeviceToHost), "copy LSE");

  if (ok) {
    /* (b, h, i): the first query row (sees 201 keys), a middle one, the last. */
    static const int rows[][3] = {{0, 0, 0}, {0, 3, 150}, {0, 5, 17}, {0, kHeadsQ - 1, kSeqlenQ - 1}};
    const double tolerance = 2e-2; /* bf16 output: ~4e-3 rounding; P is rounded to bf16 too */
    double max_err = 0.0, max_lse_err = 0.0, expect[kHeadDim];
    size_t r;
    int d;
    for (r = 0; r < sizeof(rows) / sizeof(rows[0]); ++r) {
      const int b = rows[r][0], h = rows[r][1], i = rows[r][2];
      const double lse = reference_row(h_q, h_k, h_v, b, h, i, expect);
      const double lse_err = fabs(lse - h_lse[((size_t)b * kHeadsQ + h) * kSeqlenQ + i]);
      if (lse_err > max_lse_err) max_lse_err = lse_err;
      for (d = 0; d < kHeadDim; ++d) {
        const double err = fabs(bf16_to_float(h_o[bhnd(b, h, i, kHeadsQ, kSeqlenQ) + d]) - expect[d]);
        if (err > max_err) max_err = err;
      }
    }
    printf("O[0, 0, 0, 0:4] = %.4f %.4f %.4f %.4f, LSE[0, 0, 0] = %.4f\n", bf16_to_float(h_o[0]), bf16_to_float(h_o[1]),
           bf16_to_float(h_o[2]), bf16_to_float(h_o[3]), h_lse[0]);
    printf("max abs error over %d checked rows: O %.3e, LSE %.3e (tolerance %.0e) -> %s\n",
           (int)(sizeof(rows) / sizeof(rows[0])), max_err, max_lse_err, tolerance,
           max_err <= tolerance && max_lse_err <= tolerance ? "OK" : "FAILED");
    exit_code = max_err <= tolerance && max_lse_err <= tolerance ? 0 : 1;
  }

  cudaFree(d_q);
  cudaFree(d_k);
  cudaFree(d_v);
  cudaFree(d_o);
  cudaFree(d_lse);
  if (stream != NULL) cudaStreamDestroy(stream);
  free(h_q);
  free(h_k);
  free(h_v);
  free(h_o);
  free(h_lse);
  return exit_code;
}
