// Investigation probe (not built by CMake; build it with nvcc against a
// built libflash.a and libflash_reference.a, as tools/investigations/tail-probe.sh does):
// what the persistent sm90 kernel's last, partly filled round of tiles
// costs. The seed's shapes give
// tile counts that are not multiples of the SM count (hd128 non-causal:
// 2048 tiles of 128 rows = 15.5 rounds on 132 SMs, so the last round runs
// on half the SMs). Here the batch varies at a fixed sequence length, so
// the work a tile does is the same and only the number of rounds, and how
// full the last one is, changes. Prints TFLOP/s per batch (median of 30
// launches, each after an L2-flushing memset, bf16, inputs uniform in
// (-1, 1) from the tests' and benchmark's ref::fill_uniform).
//
//   tail_probe HEAD_DIM SEQLEN CAUSAL(0|1) BATCH...
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "flash/flash.hpp"
#include "probe_util.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: tail_probe HEAD_DIM SEQLEN CAUSAL BATCH...\n");
    return 2;
  }
  const int head_dim = std::atoi(argv[1]);
  const int seqlen = std::atoi(argv[2]);
  const bool causal = std::atoi(argv[3]) != 0;
  const int heads = 2048 / head_dim;
  int max_batch = 0;
  for (int i = 4; i < argc; ++i) max_batch = std::max(max_batch, std::atoi(argv[i]));
  const size_t elems = static_cast<size_t>(max_batch) * seqlen * heads * head_dim;
  const probe::Buffers buffers = probe::make_buffers(elems, flash::DType::kBFloat16);
  void* flush;
  const size_t flush_bytes = size_t{256} << 20;
  PROBE_CHECK(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t start, stop;
  PROBE_CHECK(cudaEventCreate(&start));
  PROBE_CHECK(cudaEventCreate(&stop));
  for (int i = 4; i < argc; ++i) {
    const int batch = std::atoi(argv[i]);
    const flash::AttentionParams p =
        probe::dense_params(buffers, flash::DType::kBFloat16, batch, seqlen, heads, head_dim, causal);
    flash::KernelChoice choice;
    if (!flash::query_kernel_choice(p, &choice).ok()) return 1;
    // Warm-up: ~200 ms of launches.
    for (int w = 0; w < 400; ++w) {
      if (!flash::attention_forward(p, nullptr).ok()) return 1;
    }
    std::vector<float> ms;
    for (int r = 0; r < 30; ++r) {
      PROBE_CHECK(cudaMemsetAsync(flush, r, flush_bytes));
      PROBE_CHECK(cudaEventRecord(start));
      flash::attention_forward(p, nullptr);
      PROBE_CHECK(cudaEventRecord(stop));
      PROBE_CHECK(cudaEventSynchronize(stop));
      float t;
      PROBE_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[ms.size() / 2];
    const double pairs = causal ? seqlen * (seqlen + 1.0) / 2 : 1.0 * seqlen * seqlen;
    const double flops = 4.0 * batch * heads * head_dim * pairs;
    const int m_blocks = (seqlen + choice.block_m - 1) / choice.block_m;
    const int tiles = batch * heads * m_blocks;
    std::printf("hd%d N%d %s batch %d: %s, %d tiles = %.2f rounds of 132, %.3f ms, %.1f TFLOP/s\n", head_dim,
                seqlen, causal ? "causal" : "noncausal", batch, choice.name, tiles, tiles / 132.0, med,
                flops / med / 1e9);
  }
  return 0;
}
