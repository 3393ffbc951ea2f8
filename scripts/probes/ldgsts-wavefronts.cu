// What a 16-byte cp.async (SASS LDGSTS) costs, by where a warp's 32
// chunks come from and where they land. A question for
// docs/perf/fp8-prefill.md ("Sectors split by the copies"): the e4m3-cache
// producer's copies asked L2 for 32 sectors an instruction where 16 hold
// its bytes.
//
//   nvcc -std=c++17 -arch=sm_90a -O3 -o /tmp/ldgsts scripts/probes/ldgsts-wavefronts.cu && /tmp/ldgsts
//   ncu --clock-control none \
//     --metrics lts__t_sectors_srcunit_tex.sum,lts__t_requests_srcunit_tex.sum /tmp/ldgsts 1
//
// Every kernel copies the same bytes: a warp moves 32 rows of 128 bytes
// (an L2-resident buffer) into 4 KB of shared memory, eight instructions
// of 512 bytes, two stages in flight. Mappings, for lane l and
// instruction j (chunk = 16 bytes; slot = a chunk's place in a 128-byte
// shared-memory row):
//   linear   8 lanes a line, row 4j + l/8, chunk c = l%8 into slot c
//   swizzle  as linear, slot c ^ (row % 8)            (TMA's 128-byte swizzle)
//   split    as linear, slot (c%2)*4 + c/2            (a sector's halves apart)
//   halves   4 lanes a half line, 8 rows an instruction, the pair layout's
//            slot (2p + 1 - half) ^ (row % 8)         (the e4m3 producer before)
//   halves-n as halves, slot c ^ (row % 8)
//   zfill    swizzle, with cp.async's source-size operand
//   ldg+sts  swizzle, through registers (LDG.128, STS.128)
// Prints each kernel's copy rate (GB/s over the whole GPU); under ncu
// (argument 1: short launches) the metrics give L2 requests and sectors
// an instruction (the instruction count printed is one launch's).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace {

constexpr int kWarps = 4;
constexpr int kWarpBytes = 32 * 128;
constexpr int kStages = 2;
constexpr int kSmem = kWarps * kWarpBytes * kStages;
constexpr int kBufBytes = 8 << 20;
constexpr int kLinesInBuf = kBufBytes / kWarpBytes;

enum Map { kLinear, kSwizzle, kSplit, kHalves, kHalvesNat, kZfill, kLdgSts, kMaps };
const char* const kNames[kMaps] = {"linear", "swizzle", "split", "halves", "halves-n", "zfill", "ldg+sts"};

template <int M>
__device__ __forceinline__ void chunk_of(int lane, int j, int& row, int& c, int& slot) {
  if (M == kHalves || M == kHalvesNat) {
    const int p = lane % 4, half = j % 2;
    row = 8 * (j / 2) + lane / 4;
    c = half * 4 + p;
    slot = M == kHalves ? ((2 * p + 1 - half) ^ (row % 8)) : (c ^ (row % 8));
  } else {
    row = 4 * j + lane / 8;
    c = lane % 8;
    slot = M == kLinear ? c : M == kSplit ? (c % 2) * 4 + c / 2 : (c ^ (row % 8));
  }
}

template <int M>
__global__ void __launch_bounds__(128) copy_kernel(const unsigned char* __restrict__ src, int iters,
                                                     unsigned* __restrict__ sink) {
  extern __shared__ __align__(1024) unsigned char smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem)) + warp * kWarpBytes;
  unsigned acc = 0;
  for (int it = 0; it < iters; ++it) {
    const int block = (blockIdx.x * kWarps + warp + it * 977) % kLinesInBuf;
    const unsigned char* g = src + static_cast<size_t>(block) * kWarpBytes;
    const uint32_t s = base + (it % kStages) * kWarps * kWarpBytes;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      int row, c, slot;
      chunk_of<M>(lane, j, row, c, slot);
      const unsigned char* from = g + row * 128 + c * 16;
      const uint32_t to = s + row * 128 + slot * 16;
      if constexpr (M == kLdgSts) {
        const uint4 v = *reinterpret_cast<const uint4*>(from);
        asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(to), "r"(v.x), "r"(v.y), "r"(v.z),
                     "r"(v.w)
                     : "memory");
      } else if constexpr (M == kZfill) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(to), "l"(from), "r"(16) : "memory");
      } else {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(from) : "memory");
      }
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    __syncwarp();
    if (lane == 0) acc += smem[(it % kStages) * kWarps * kWarpBytes + warp * kWarpBytes + (it % 4096)];
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  if (acc == 0x12345678u) sink[threadIdx.x] = acc;
}

template <int M>
float run(const unsigned char* src, unsigned* sink, int grid, int iters) {
  cudaFuncSetAttribute(copy_kernel<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  copy_kernel<M><<<grid, 128, kSmem>>>(src, iters, sink);
  cudaEventRecord(a);
  copy_kernel<M><<<grid, 128, kSmem>>>(src, iters, sink);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  const bool once = argc > 1;  // under ncu: short launches
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int grid = sms * 4;
  const int iters = once ? 64 : 4096;
  unsigned char* src = nullptr;
  unsigned* sink = nullptr;
  cudaMalloc(&src, kBufBytes);
  cudaMalloc(&sink, 4096);
  cudaMemset(src, 1, kBufBytes);
  float ms[kMaps] = {run<kLinear>(src, sink, grid, iters),  run<kSwizzle>(src, sink, grid, iters),
                     run<kSplit>(src, sink, grid, iters),   run<kHalves>(src, sink, grid, iters),
                     run<kHalvesNat>(src, sink, grid, iters), run<kZfill>(src, sink, grid, iters),
                     run<kLdgSts>(src, sink, grid, iters)};
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::printf("error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  const double bytes = static_cast<double>(grid) * kWarps * kWarpBytes * iters;
  std::printf("| mapping | ms | GB/s | instructions (one launch) |\n|---|---|---|---|\n");
  for (int m = 0; m < kMaps; ++m)
    std::printf("| %s | %.3f | %.0f | %.4g |\n", kNames[m], ms[m], bytes / ms[m] / 1e6,
                static_cast<double>(grid) * kWarps * 8 * iters);
  return 0;
}
