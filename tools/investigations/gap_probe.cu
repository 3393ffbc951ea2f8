// Investigation probe (not built by CMake; tools/investigations/gap-probe.sh builds it
// against libflash.a and libflash_reference.a): does the host's launch
// cost leak into flash_bench's event timing? LaunchTimer (bench_util.h)
// records the start event right after the L2-flushing memset and counts
// on that memset to keep the GPU busy while the host enqueues the
// attention launch. If the host took longer than the memset, the GPU
// would idle between the start event and the kernel, and that idle time
// would be timed. Per iteration, interleaved:
//   a: memset, start, launch, stop            (flash_bench's order)
//   b: memset, host callback sleeping 300 us, start, launch, stop
//      (the launch is surely enqueued before the start event fires)
// and, on the host, the time attention_forward takes to return, and the
// memset's own GPU time. Prints medians of 30 (flash_bench's median, from
// bench_util.h, as is the L2 flush), after ~200 ms of warm-up.
//
//   gap_probe HEAD_DIM SEQLEN CAUSAL(0|1) DTYPE(bf16|fp16)
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "flash/flash.hpp"
#include "probe_util.h"

namespace {

void CUDART_CB sleep_300us(void*) { std::this_thread::sleep_for(std::chrono::microseconds(300)); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: gap_probe HEAD_DIM SEQLEN CAUSAL DTYPE\n");
    return 2;
  }
  const int head_dim = std::atoi(argv[1]);
  const int seqlen = std::atoi(argv[2]);
  const bool causal = std::atoi(argv[3]) != 0;
  const bool fp16 = std::strcmp(argv[4], "fp16") == 0;
  const flash::DType dtype = fp16 ? flash::DType::kFloat16 : flash::DType::kBFloat16;
  const int heads = 2048 / head_dim;
  const int batch = std::max(1, 16384 / seqlen);
  const size_t elems = static_cast<size_t>(batch) * seqlen * heads * head_dim;
  const probe::Buffers buffers = probe::make_buffers(elems, dtype);
  int device = 0;
  PROBE_CHECK(cudaGetDevice(&device));
  flash_bench::L2Flusher flusher;  // flash_bench's own flush
  if (const std::string err = flusher.init(device); !err.empty()) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  cudaEvent_t e0, e1, e2;
  PROBE_CHECK(cudaEventCreate(&e0));
  PROBE_CHECK(cudaEventCreate(&e1));
  PROBE_CHECK(cudaEventCreate(&e2));
  const flash::AttentionParams p = probe::dense_params(buffers, dtype, batch, seqlen, heads, head_dim, causal);
  flash::KernelChoice choice;
  if (!flash::query_kernel_choice(p, &choice).ok()) return 1;
  const auto warm_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < warm_end) {
    if (!flash::attention_forward(p, nullptr).ok()) return 1;
    PROBE_CHECK(cudaDeviceSynchronize());
  }
  std::vector<double> a, b, host_us, memset_us;
  for (int r = 0; r < 30; ++r) {
    for (int mode = 0; mode < 2; ++mode) {
      PROBE_CHECK(cudaEventRecord(e0));
      if (const std::string err = flusher.flush(nullptr); !err.empty()) {
        std::fprintf(stderr, "%s\n", err.c_str());
        return 1;
      }
      if (mode == 1) PROBE_CHECK(cudaLaunchHostFunc(nullptr, sleep_300us, nullptr));
      PROBE_CHECK(cudaEventRecord(e1));
      const auto h0 = std::chrono::steady_clock::now();
      if (!flash::attention_forward(p, nullptr).ok()) return 1;
      const auto h1 = std::chrono::steady_clock::now();
      PROBE_CHECK(cudaEventRecord(e2));
      PROBE_CHECK(cudaEventSynchronize(e2));
      float t_flush = 0.f, t_kernel = 0.f;
      PROBE_CHECK(cudaEventElapsedTime(&t_kernel, e1, e2));
      if (mode == 0) {
        PROBE_CHECK(cudaEventElapsedTime(&t_flush, e0, e1));
        memset_us.push_back(1e3 * t_flush);
        host_us.push_back(std::chrono::duration<double, std::micro>(h1 - h0).count());
        a.push_back(t_kernel);
      } else {
        b.push_back(t_kernel);
      }
    }
  }
  const double pairs = causal ? seqlen * (seqlen + 1.0) / 2 : 1.0 * seqlen * seqlen;
  const double flops = 4.0 * batch * heads * head_dim * pairs;
  using flash_bench::median;
  const double ma = median(a), mb = median(b);
  std::printf("%s hd%d N%d %s (%s): a %.1f us %.1f TFLOP/s | b %.1f us %.1f TFLOP/s | b/a time %.4f | "
              "host call %.1f us, memset %.1f us\n",
              argv[4], head_dim, seqlen, causal ? "causal" : "noncausal", choice.name, 1e3 * ma, flops / ma / 1e9,
              1e3 * mb, flops / mb / 1e9, mb / ma, median(host_us), median(memset_us));
  return 0;
}
