// Where does a TMA box land in shared memory when its innermost dimension
// is narrower than the 128-byte swizzle? A question for
// docs/perf/fp8-prefill.md ("TMA for the e4m3 copies"): the e4m3-cache
// producer's layout puts a key row's 32-byte sectors of two 64-byte halves
// side by side (slot 4a + 2h + b), which a box of a five-dimensional view
// of the cache could write with 32 bytes innermost: (32 bytes, half h at
// stride 64, sector a at stride 32, key row, 128-byte line). The answer
// (H100, 2026-12-05): every box row takes a 128-byte row of shared memory
// whatever its width, so such a view cannot pack a line; an earlier form
// of this probe, 16 bytes innermost in 16 KB, faulted for that reason.
//
//   nvcc -std=c++17 -arch=sm_90a -o /tmp/tma-pair-box scripts/probes/tma-pair-box.cu && /tmp/tma-pair-box
//
// For inner widths of 16, 32, 64 and 128 bytes it loads one box of 64 key
// rows (one 128-byte line each) into a 64 KB buffer filled with a
// sentinel, then finds each source 16-byte chunk (unique contents) and
// prints where the first rows' chunks landed, the box's footprint, and
// whether slot s of box row r is at r * 128 + (s ^ (r % 8)) * 16.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

constexpr int kRows = 64;         // key rows a box
constexpr int kRowStride = 2048;  // bytes between key rows (e.g. 8 heads of 256)
constexpr int kKeys = 256;
constexpr int kBuffer = 64 * 1024;  // shared memory the box may land in
constexpr unsigned char kSentinel = 0xee;

__global__ void load_box(const __grid_constant__ CUtensorMap map, int rank, int row0, unsigned box_bytes,
                         unsigned char* out) {
  extern __shared__ __align__(1024) unsigned char raw[];
  __shared__ __align__(8) uint64_t bar;
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(raw));
  const uint32_t dst = (raw_addr + 1023u) & ~1023u;  // the swizzle's phase follows the address
  unsigned char* smem = raw + (dst - raw_addr);
  for (int i = threadIdx.x; i < kBuffer; i += blockDim.x) smem[i] = kSentinel;
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const uint32_t b = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "r"(box_bytes) : "memory");
    if (rank == 5) {
      asm volatile(
          "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, "
          "%6, %7}], [%2];\n" ::"r"(dst),
          "l"(&map), "r"(b), "r"(0), "r"(0), "r"(0), "r"(row0), "r"(0)
          : "memory");
    } else {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], "
          "[%2];\n" ::"r"(dst),
          "l"(&map), "r"(b), "r"(0), "r"(row0)
          : "memory");
    }
    asm volatile(
        "{\n.reg .pred p;\nwait%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n@!p bra wait%=;\n}\n" ::"r"(b)
        : "memory");
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kBuffer; i += blockDim.x) out[i] = smem[i];
}

}  // namespace

int main() {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult query;
  if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &query) !=
          cudaSuccess ||
      query != cudaDriverEntryPointSuccess) {
    std::printf("no cuTensorMapEncodeTiled\n");
    return 2;
  }
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  // Every 16-byte chunk of the source holds its own index (four copies of a 32-bit word).
  std::vector<unsigned char> host(static_cast<size_t>(kKeys) * kRowStride);
  for (size_t c = 0; c < host.size() / 16; ++c) {
    const uint32_t id = static_cast<uint32_t>(c) | 0x01000000u;
    for (int k = 0; k < 4; ++k) std::memcpy(&host[c * 16 + 4 * k], &id, 4);
  }
  unsigned char *src = nullptr, *out = nullptr;
  cudaMalloc(&src, host.size());
  cudaMalloc(&out, kBuffer);
  cudaMemcpy(src, host.data(), host.size(), cudaMemcpyHostToDevice);
  cudaFuncSetAttribute(load_box, cudaFuncAttributeMaxDynamicSharedMemorySize, kBuffer + 1024);
  const int row0 = 64;
  int failures = 0;
  for (int inner : {16, 32, 64, 128}) {
    // The view: inner bytes, then the 128-byte line's 128 / inner pieces in
    // the order (half of the line, piece within the half), then key rows.
    // For 128 a plain 2-D box.
    alignas(64) CUtensorMap map;
    CUresult r;
    int rank;
    if (inner == 128) {
      rank = 2;
      const cuuint64_t dims[2] = {128, kKeys};
      const cuuint64_t strides[1] = {kRowStride};
      const cuuint32_t box[2] = {128, kRows};
      const cuuint32_t es[2] = {1, 1};
      r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, src, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    } else {
      rank = 5;
      const cuuint64_t per_half = 64 / inner;
      const cuuint64_t dims[5] = {static_cast<cuuint64_t>(inner), 2, per_half, kKeys, 1};
      const cuuint64_t strides[4] = {64, static_cast<cuuint64_t>(inner), kRowStride, 128};
      const cuuint32_t box[5] = {static_cast<cuuint32_t>(inner), 2, static_cast<cuuint32_t>(per_half), kRows, 1};
      const cuuint32_t es[5] = {1, 1, 1, 1, 1};
      r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 5, src, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                 CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    }
    std::printf("inner %3d bytes: encode %s", inner, r == CUDA_SUCCESS ? "accepted" : "refused");
    if (r != CUDA_SUCCESS) {
      std::printf("\n");
      continue;
    }
    load_box<<<1, 256, kBuffer + 1024>>>(map, rank, row0, kRows * 128, out);
    const cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      std::printf("; kernel: %s\n", cudaGetErrorString(e));
      return 1;  // the context is lost
    }
    std::vector<unsigned char> got(kBuffer);
    cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost);
    int last = -1, swizzled = 0, found = 0;
    // Box row r's logical slot s: half h = s / (8 / 2), then piece, in the view's order.
    auto source_chunk = [&](int row, int s) {
      const int chunks_per_inner = inner / 16;
      const int pieces = 64 / inner;
      const int unit = s / chunks_per_inner, within = s % chunks_per_inner;
      const int h = inner == 128 ? 0 : unit % 2, piece = inner == 128 ? 0 : unit / 2;
      const int byte = inner == 128 ? 16 * s : h * 64 + piece * inner + 16 * within;
      (void)pieces;
      return (static_cast<size_t>(row0 + row) * kRowStride + byte) / 16;
    };
    std::printf("; row 0-1 slots land at:");
    for (int row = 0; row < kRows; ++row) {
      for (int s = 0; s < 8; ++s) {
        const uint32_t id = static_cast<uint32_t>(source_chunk(row, s)) | 0x01000000u;
        int at = -1;
        for (int o = 0; o + 16 <= kBuffer; o += 16) {
          uint32_t w;
          std::memcpy(&w, &got[o], 4);
          if (w == id) {
            at = o;
            break;
          }
        }
        if (at >= 0) ++found;
        last = at > last ? at : last;
        if (at == row * 128 + ((s ^ (row % 8)) * 16)) ++swizzled;
        if (row < 2) std::printf(" %d", at);
      }
    }
    std::printf("; found %d of %d; footprint %d bytes; at r*128 + (s^(r%%8))*16: %d\n", found, kRows * 8, last + 16,
                swizzled);
    if (swizzled != kRows * 8) ++failures;
  }
  cudaFree(src);
  cudaFree(out);
  return failures == 0 ? 0 : 1;
}
