// flash::cp's ring engine (src/cp/ring.h) with every rank of a ring on one
// GPU: the ranks run each step in lockstep and their K/V move by copies
// instead of NCCL; each rank's rows must match the unsharded call. Then
// ring_attention_forward itself over a one-rank NCCL communicator (the
// only ring one GPU can hold), and RingParams' argument checks.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "feature_case.h"
#include "flash/cp.hpp"
#include "full_call.h"
#include "gpu_case.h"
#include "src/cp/ring.h"

namespace flash::test {
namespace {

constexpr uint64_t kCpSeedBase = uint64_t{1} << 30;

// The unsharded call: [batch, n, heads, head_dim], LSE on.
::testing::AssertionResult run_full(FullCall* full, DType dtype, int64_t hd, int64_t batch, int64_t n, int64_t hq,
                                    int64_t hkv, bool causal, uint64_t seed, cudaStream_t stream) {
  AttentionParams shape;
  shape.dtype = dtype;
  shape.head_dim = hd;
  shape.batch = batch;
  shape.seqlen_q = shape.seqlen_k = n;
  shape.heads_q = hq;
  shape.heads_kv = hkv;
  shape.causal = causal;
  return full->run(shape, seed, stream);
}

// One rank's shard of `full`: chunks r and 2R - 1 - r of every sequence,
// gathered densely, and its own O, LSE and ring buffer.
struct Shard {
  cp::RingParams rp;
  DeviceBuffer q, k, v, o, lse, buffer;
  ::testing::AssertionResult make(const FullCall& full, int rank, int world, cudaStream_t stream) {
    const AttentionParams& f = full.params;
    const int64_t c = f.seqlen_q / (2 * world);
    AttentionParams p = f;
    p.seqlen_q = p.seqlen_k = 2 * c;
    p.set_contiguous_bnhd();
    const size_t qn = static_cast<size_t>(f.batch * 2 * c * f.heads_q * f.head_dim);
    const size_t kn = static_cast<size_t>(f.batch * 2 * c * f.heads_kv * f.head_dim);
    if (q.allocate(qn * 2) != cudaSuccess || k.allocate(kn * 2) != cudaSuccess || v.allocate(kn * 2) != cudaSuccess ||
        o.allocate(qn * 2) != cudaSuccess ||
        lse.allocate(static_cast<size_t>(f.batch * f.heads_q * 2 * c) * 4) != cudaSuccess) {
      return ::testing::AssertionFailure() << "cudaMalloc";
    }
    // Rows of chunk g of each sequence into slot x of the shard.
    for (int x = 0; x < 2; ++x) {
      const int64_t g = x == 0 ? rank : 2 * world - 1 - rank;
      struct Copy {
        void* dst;
        const void* src;
        int64_t heads;
      } copies[] = {{q.ptr, full.q.ptr, f.heads_q}, {k.ptr, full.k.ptr, f.heads_kv}, {v.ptr, full.v.ptr, f.heads_kv}};
      for (const Copy& cp : copies) {
        const size_t row = static_cast<size_t>(c * cp.heads * f.head_dim) * 2;  // one chunk of one sequence
        const cudaError_t err = cudaMemcpy2DAsync(
            static_cast<char*>(cp.dst) + x * row, 2 * row, static_cast<const char*>(cp.src) + g * row,
            static_cast<size_t>(2 * world) * row, row, static_cast<size_t>(f.batch), cudaMemcpyDeviceToDevice, stream);
        if (err != cudaSuccess) return ::testing::AssertionFailure() << cudaGetErrorString(err);
      }
    }
    p.q = q.ptr;
    p.k = k.ptr;
    p.v = v.ptr;
    p.o = o.ptr;
    p.lse = static_cast<float*>(lse.ptr);
    rp.local = p;
    rp.rank = rank;
    rp.world = world;
    size_t bytes = 0;
    const Status s = cp::ring_buffer_size(rp, &bytes);
    if (!s.ok()) return ::testing::AssertionFailure() << s.message;
    if (buffer.allocate(bytes) != cudaSuccess) return ::testing::AssertionFailure() << "cudaMalloc(buffer)";
    rp.buffer = buffer.ptr;
    rp.buffer_bytes = bytes;
    const Status v2 = cp::validate(rp);
    if (!v2.ok()) return ::testing::AssertionFailure() << v2.message;
    return ::testing::AssertionSuccess();
  }
};

// Each shard's O and LSE against the unsharded call's rows at its chunks:
// relative L2 of O and the largest LSE difference, over all shards.
::testing::AssertionResult compare(const FullCall& full, const std::vector<std::unique_ptr<Shard>>& shards,
                                   cudaStream_t stream, double* rel_l2, double* lse_err) {
  const AttentionParams& f = full.params;
  const int world = static_cast<int>(shards.size());
  const int64_t c = f.seqlen_q / (2 * world), hq = f.heads_q, hd = f.head_dim, n = f.seqlen_q;
  std::vector<uint16_t> ref_o, o;
  std::vector<float> ref_lse, lse;
  if (!download(&ref_o, full.o.ptr, full.q_count, stream) ||
      !download(&ref_lse, full.lse.ptr, full.lse_count, stream)) {
    return ::testing::AssertionFailure() << "download failed";
  }
  double diff = 0, norm = 0, lse_max = 0;
  for (int r = 0; r < world; ++r) {
    if (!download(&o, shards[r]->o.ptr, static_cast<size_t>(f.batch * 2 * c * hq * hd), stream) ||
        !download(&lse, static_cast<const float*>(shards[r]->lse.ptr), static_cast<size_t>(f.batch * hq * 2 * c),
                  stream)) {
      return ::testing::AssertionFailure() << "download failed";
    }
    for (int64_t b = 0; b < f.batch; ++b) {
      for (int64_t x = 0; x < 2; ++x) {
        const int64_t g = x == 0 ? r : 2 * world - 1 - r;
        for (int64_t i = 0; i < c; ++i) {
          for (int64_t e = 0; e < hq * hd; ++e) {
            const double got = ref::to_float(o[static_cast<size_t>(((b * 2 * c) + x * c + i) * hq * hd + e)], f.dtype);
            const double want = ref::to_float(ref_o[static_cast<size_t>(((b * n) + g * c + i) * hq * hd + e)], f.dtype);
            diff += (got - want) * (got - want);
            norm += want * want;
          }
          for (int64_t h = 0; h < hq; ++h) {
            const double got = lse[static_cast<size_t>((b * hq + h) * 2 * c + x * c + i)];
            const double want = ref_lse[static_cast<size_t>((b * hq + h) * n + g * c + i)];
            lse_max = std::fmax(lse_max, std::fabs(got - want));
          }
        }
      }
    }
  }
  *rel_l2 = std::sqrt(diff / norm);
  *lse_err = lse_max;
  return ::testing::AssertionSuccess();
}

class CpRing : public GpuTest {};

TEST_F(CpRing, LockstepRanksMatchTheUnshardedCall) {
  const int64_t hd = first_compiled({128, 64});
  ASSERT_NE(hd, 0);
  for (int world : {1, 2, 4, 8}) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE("world " + std::to_string(world) + (causal ? " causal" : " full"));
      const int64_t c = 80;  // not a multiple of the kernels' tiles
      FullCall full;
      ASSERT_TRUE(run_full(&full, DType::kBFloat16, hd, 2, 2 * world * c, 8, 2, causal,
                           case_seed(kCpSeedBase + static_cast<uint64_t>(world * 2 + causal)), stream_));
      std::vector<std::unique_ptr<Shard>> shards;
      std::vector<std::unique_ptr<cp::detail::Ring>> rings;
      for (int r = 0; r < world; ++r) {
        shards.push_back(std::make_unique<Shard>());
        ASSERT_TRUE(shards.back()->make(full, r, world, stream_));
        ASSERT_EQ(ref::poison(shards.back()->o.ptr, shards.back()->o.bytes, stream_), cudaSuccess);
        ASSERT_EQ(ref::poison(shards.back()->lse.ptr, shards.back()->lse.bytes, stream_), cudaSuccess);
        rings.push_back(std::make_unique<cp::detail::Ring>(shards.back()->rp));
      }
      for (int step = 0; step < world; ++step) {
        for (int r = 0; r < world; ++r) {
          const Status s = rings[r]->compute_step(step, stream_);
          ASSERT_TRUE(s.ok()) << s.message;
        }
        if (step + 1 == world) break;
        // Rank r's held K/V go to rank r + 1, as ncclSend / ncclRecv would move them.
        for (int r = 0; r < world; ++r) {
          const cp::detail::Ring& from = *rings[r];
          const cp::detail::Ring& to = *rings[(r + 1) % world];
          ASSERT_EQ(
              cudaMemcpyAsync(to.k_next(step), from.k_at(step), from.kv_bytes(), cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
          ASSERT_EQ(
              cudaMemcpyAsync(to.v_next(step), from.v_at(step), from.kv_bytes(), cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
        }
      }
      for (int r = 0; r < world; ++r) {
        const Status s = rings[r]->finish(stream_);
        ASSERT_TRUE(s.ok()) << s.message;
      }
      double rel_l2 = 0, lse_err = 0;
      ASSERT_TRUE(compare(full, shards, stream_, &rel_l2, &lse_err));
      std::printf("[cp] world %d %s: rel_l2 %.3g, max |lse diff| %.3g\n", world, causal ? "causal" : "full", rel_l2,
                  lse_err);
      EXPECT_LE(rel_l2, 1e-2);  // partial results are rounded to bf16 between merges
      EXPECT_LE(lse_err, 1e-3);
    }
  }
}

// ring_attention_forward over a real one-rank NCCL communicator: the driver
// (events, streams, the final copies) on the only ring one GPU holds.
TEST_F(CpRing, OneRankCommunicatorMatchesTheUnshardedCall) {
  const int64_t hd = first_compiled({128, 64});
  ASSERT_NE(hd, 0);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess);
  cudaStream_t comm_stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking), cudaSuccess);
  for (bool causal : {true, false}) {
    FullCall full;
    ASSERT_TRUE(
        run_full(&full, DType::kFloat16, hd, 2, 2 * 200, 8, 8, causal, case_seed(kCpSeedBase + 100 + causal), stream_));
    std::vector<std::unique_ptr<Shard>> shards;
    shards.push_back(std::make_unique<Shard>());
    ASSERT_TRUE(shards[0]->make(full, 0, 1, stream_));
    const Status s = cp::ring_attention_forward(shards[0]->rp, comm, stream_, comm_stream);
    ASSERT_TRUE(s.ok()) << s.message;
    double rel_l2 = 0, lse_err = 0;
    ASSERT_TRUE(compare(full, shards, stream_, &rel_l2, &lse_err));
    EXPECT_LE(rel_l2, 5e-3) << (causal ? "causal" : "full");
    EXPECT_LE(lse_err, 1e-3);
    // The wrong rank count is refused before anything is enqueued.
    cp::RingParams wrong = shards[0]->rp;
    wrong.world = 2;
    EXPECT_EQ(cp::ring_attention_forward(wrong, comm, stream_, comm_stream).code, StatusCode::kInvalidArgument);
  }
  cudaStreamDestroy(comm_stream);
  ncclCommDestroy(comm);
}

// RingParams' checks, without a GPU.
TEST(CpRingParams, RefusesWhatTheRingCannotRun) {
  if (!head_dim_compiled(128)) GTEST_SKIP() << "head_dim 128 not compiled";
  AttentionParams p;
  p.dtype = DType::kBFloat16;
  p.batch = 2;
  p.seqlen_q = p.seqlen_k = 256;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
  p.set_contiguous_bnhd();
  p.q = reinterpret_cast<void*>(uintptr_t{1} << 40);
  p.k = reinterpret_cast<void*>(uintptr_t{2} << 40);
  p.v = reinterpret_cast<void*>(uintptr_t{3} << 40);
  p.o = reinterpret_cast<void*>(uintptr_t{4} << 40);
  cp::RingParams rp;
  rp.local = p;
  rp.world = 4;
  rp.rank = 1;
  size_t bytes = 0;
  ASSERT_TRUE(cp::ring_buffer_size(rp, &bytes).ok());
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(cp::validate(rp).code, StatusCode::kInvalidArgument);  // no buffer yet
  rp.buffer = reinterpret_cast<void*>(uintptr_t{5} << 40);
  rp.buffer_bytes = bytes;
  EXPECT_TRUE(cp::validate(rp).ok()) << cp::validate(rp).message;
  auto refused = [&](cp::RingParams bad, const char* word) {
    const Status s = cp::validate(bad);
    return s.code == StatusCode::kInvalidArgument && std::string(s.message).find(word) != std::string::npos;
  };
  cp::RingParams bad = rp;
  bad.buffer_bytes = bytes - 1;
  EXPECT_TRUE(refused(bad, "buffer_bytes"));
  bad = rp;
  bad.rank = 4;
  EXPECT_TRUE(refused(bad, "rank"));
  bad = rp;
  bad.local.seqlen_q = bad.local.seqlen_k = 255;
  bad.local.set_contiguous_bnhd();
  EXPECT_TRUE(refused(bad, "even"));
  bad = rp;
  bad.local.window_left = 64;
  EXPECT_TRUE(refused(bad, "window"));
  bad = rp;
  bad.local.k_seq_stride *= 2;
  EXPECT_TRUE(refused(bad, "densely packed"));
  bad = rp;
  bad.local.sinks = reinterpret_cast<const float*>(uintptr_t{6} << 40);
  EXPECT_TRUE(refused(bad, "sinks"));
}

}  // namespace
}  // namespace flash::test
