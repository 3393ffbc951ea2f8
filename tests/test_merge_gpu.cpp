// flash::merge_states on the device: random states against a float64 merge
// on the host (rows with every LSE -inf included), three attention calls
// over disjoint key slices merged against one call over all the keys,
// bitwise determinism, in place against out of place, and no LSE.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "device_tensor.h"
#include "feature_case.h"
#include "full_call.h"
#include "gpu_case.h"

namespace flash::test {
namespace {

class MergeStates : public GpuTest {};

// n states of uniform O in [-1, 1) and LSEs in [-6, 6): in every batch,
// row (token 0, head 0) has every state -inf (O = 0, LSE -inf expected) and
// row (token 1, head 0) all but state 0.
TEST_F(MergeStates, MatchesAFloat64Merge) {
  const int64_t hd = first_compiled({128, 64});
  ASSERT_NE(hd, 0);
  uint64_t seed = case_seed(7001);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (int64_t n : {1, 2, 3, 7, 128}) {
      SCOPED_TRACE((dtype == DType::kFloat16 ? std::string("fp16") : std::string("bf16")) + " n " + std::to_string(n) +
                   " hd " + std::to_string(hd));
      MergeParams p;
      p.dtype = dtype;
      p.num_states = n;
      p.batch = 2;
      p.seqlen_q = 9;
      p.heads = 3;
      p.head_dim = hd;
      p.set_contiguous();
      const int64_t rows = p.batch * p.heads * p.seqlen_q;
      const size_t o_count = static_cast<size_t>(rows * hd);
      DeviceBuffer o_states, lse_states, o, lse;
      ASSERT_EQ(o_states.allocate(o_count * n * 2), cudaSuccess);
      ASSERT_EQ(lse_states.allocate(static_cast<size_t>(rows * n) * 4), cudaSuccess);
      ASSERT_EQ(o.allocate(o_count * 2), cudaSuccess);
      ASSERT_EQ(lse.allocate(static_cast<size_t>(rows) * 4), cudaSuccess);
      ASSERT_EQ(ref::fill_uniform(o_states.ptr, dtype, o_count * n, ++seed, 1.f, stream_), cudaSuccess);
      std::vector<float> lse_host(static_cast<size_t>(rows * n));
      for (size_t i = 0; i < lse_host.size(); ++i) {
        lse_host[i] = static_cast<float>(splitmix64(seed * 1000003 + i) % 12000) / 1000.f - 6.f;
      }
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t b = 0; b < p.batch; ++b) {
          const int64_t row0 = b * p.heads * p.seqlen_q;  // head 0, token 0
          lse_host[static_cast<size_t>(s * rows + row0)] = -INFINITY;
          if (s > 0) lse_host[static_cast<size_t>(s * rows + row0 + 1)] = -INFINITY;
        }
      }
      ASSERT_EQ(ref::upload_sync(lse_states.ptr, lse_host.data(), lse_host.size() * 4, stream_), cudaSuccess);
      ASSERT_EQ(ref::poison(o.ptr, o_count * 2, stream_), cudaSuccess);
      ASSERT_EQ(ref::poison(lse.ptr, static_cast<size_t>(rows) * 4, stream_), cudaSuccess);
      p.o_states = o_states.ptr;
      p.lse_states = static_cast<const float*>(lse_states.ptr);
      p.o = o.ptr;
      p.lse = static_cast<float*>(lse.ptr);
      const Status st = merge_states(p, stream_);
      ASSERT_TRUE(st.ok()) << st.message;

      std::vector<uint16_t> in_host, out_host;
      std::vector<float> lse_out;
      ASSERT_TRUE(download(&in_host, o_states.ptr, o_count * n, stream_));
      ASSERT_TRUE(download(&out_host, o.ptr, o_count, stream_));
      ASSERT_TRUE(download(&lse_out, static_cast<const float*>(lse.ptr), static_cast<size_t>(rows), stream_));
      const double tol = dtype == DType::kFloat16 ? 2e-3 : 8e-3;
      int bad = 0;
      for (int64_t b = 0; b < p.batch; ++b) {
        for (int64_t h = 0; h < p.heads; ++h) {
          for (int64_t t = 0; t < p.seqlen_q; ++t) {
            const int64_t row = (b * p.heads + h) * p.seqlen_q + t;  // the LSE's order
            double m = -INFINITY;
            for (int64_t s = 0; s < n; ++s) m = std::fmax(m, lse_host[static_cast<size_t>(s * rows + row)]);
            double sum = 0.0;
            if (m != -INFINITY) {
              for (int64_t s = 0; s < n; ++s) sum += std::exp(lse_host[static_cast<size_t>(s * rows + row)] - m);
            }
            const double ref_lse = m == -INFINITY ? -INFINITY : m + std::log(sum);
            const float got_lse = lse_out[static_cast<size_t>(row)];
            if (ref_lse == -INFINITY ? got_lse != -INFINITY : !(std::fabs(got_lse - ref_lse) <= 1e-4)) {
              if (++bad <= 5) ADD_FAILURE() << "lse row " << row << ": " << got_lse << " vs " << ref_lse;
            }
            const int64_t o_row = ((b * p.seqlen_q + t) * p.heads + h) * hd;  // [B, N, H, D]
            for (int64_t c = 0; c < hd; ++c) {
              double ref_o = 0.0;
              if (ref_lse != -INFINITY) {
                for (int64_t s = 0; s < n; ++s) {
                  const double w = std::exp(lse_host[static_cast<size_t>(s * rows + row)] - ref_lse);
                  ref_o += w * ref::to_float(
                                   in_host[static_cast<size_t>(s * static_cast<int64_t>(o_count) + o_row + c)], dtype);
                }
              }
              const float got = ref::to_float(out_host[static_cast<size_t>(o_row + c)], dtype);
              if (!(std::fabs(got - ref_o) <= tol)) {
                if (++bad <= 5) ADD_FAILURE() << "o row " << row << " col " << c << ": " << got << " vs " << ref_o;
              }
            }
          }
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
}

// Attention over keys [0, 1000) against the merge of three calls over
// [0, 300), [300, 700) and [700, 1000), each writing its O and LSE as one
// state; then the merge again (bitwise the same), in place into state 1
// (bitwise the same O and LSE), and without an LSE (the same O).
TEST_F(MergeStates, ThreeKeySlicesMatchOneCall) {
  const int64_t hd = first_compiled({128, 64});
  ASSERT_NE(hd, 0);
  const DType dtype = DType::kBFloat16;
  AttentionParams shape;
  shape.dtype = dtype;
  shape.head_dim = hd;
  shape.batch = 2;
  shape.seqlen_q = 64;
  shape.seqlen_k = 1000;
  shape.heads_q = 8;
  shape.heads_kv = 2;
  FullCall call;
  ASSERT_TRUE(call.run(shape, case_seed(7101), stream_));
  const AttentionParams& full = call.params;
  const size_t q_count = call.q_count;
  const int64_t rows = static_cast<int64_t>(call.lse_count);
  DeviceBuffer o_states, lse_states, o, lse, o_again, lse_again;
  ASSERT_EQ(o_states.allocate(3 * q_count * 2), cudaSuccess);
  ASSERT_EQ(lse_states.allocate(3 * static_cast<size_t>(rows) * 4), cudaSuccess);
  ASSERT_EQ(o.allocate(q_count * 2), cudaSuccess);
  ASSERT_EQ(lse.allocate(static_cast<size_t>(rows) * 4), cudaSuccess);
  ASSERT_EQ(o_again.allocate(q_count * 2), cudaSuccess);
  ASSERT_EQ(lse_again.allocate(static_cast<size_t>(rows) * 4), cudaSuccess);
  Status st;

  const int64_t cuts[4] = {0, 300, 700, 1000};
  for (int s = 0; s < 3; ++s) {
    AttentionParams part = full;
    const int64_t offset = cuts[s] * full.k_seq_stride * 2;  // bytes
    part.k = static_cast<const char*>(call.k.ptr) + offset;
    part.v = static_cast<const char*>(call.v.ptr) + offset;
    part.seqlen_k = cuts[s + 1] - cuts[s];
    part.o = static_cast<char*>(o_states.ptr) + s * q_count * 2;
    part.lse = static_cast<float*>(lse_states.ptr) + s * rows;
    st = attention_forward(part, stream_);
    ASSERT_TRUE(st.ok()) << st.message;
  }
  MergeParams m;
  m.dtype = dtype;
  m.num_states = 3;
  m.batch = full.batch;
  m.seqlen_q = full.seqlen_q;
  m.heads = full.heads_q;
  m.head_dim = hd;
  m.set_contiguous();
  m.o_states = o_states.ptr;
  m.lse_states = static_cast<const float*>(lse_states.ptr);
  m.o = o.ptr;
  m.lse = static_cast<float*>(lse.ptr);
  st = merge_states(m, stream_);
  ASSERT_TRUE(st.ok()) << st.message;

  FullCall::Distance d;
  ASSERT_TRUE(call.distance(o.ptr, &d, stream_));
  // Both are bf16 results; the merge adds the states' own rounding (each
  // state is an average of values in [-1, 1), rounded to bf16 once).
  EXPECT_LE(d.rel_l2, 1e-2);
  EXPECT_LE(d.max_abs, 4 * 0.0078125 * d.max_ref);
  std::vector<uint16_t> got_o;
  std::vector<float> ref_lse, got_lse;
  ASSERT_TRUE(download(&got_o, o.ptr, q_count, stream_));
  ASSERT_TRUE(download(&ref_lse, call.lse.ptr, static_cast<size_t>(rows), stream_));
  ASSERT_TRUE(download(&got_lse, lse.ptr, static_cast<size_t>(rows), stream_));
  double lse_err = 0.0;
  for (int64_t i = 0; i < rows; ++i) lse_err = std::fmax(lse_err, std::fabs(got_lse[i] - ref_lse[i]));
  EXPECT_LE(lse_err, 1e-3);

  // Deterministic: the same merge again, bitwise.
  MergeParams again = m;
  again.o = o_again.ptr;
  again.lse = static_cast<float*>(lse_again.ptr);
  ASSERT_TRUE(merge_states(again, stream_).ok());
  std::vector<uint16_t> again_o;
  std::vector<float> again_lse;
  ASSERT_TRUE(download(&again_o, o_again.ptr, q_count, stream_));
  ASSERT_TRUE(download(&again_lse, static_cast<const float*>(lse_again.ptr), static_cast<size_t>(rows), stream_));
  EXPECT_EQ(std::memcmp(again_o.data(), got_o.data(), q_count * 2), 0);
  EXPECT_EQ(std::memcmp(again_lse.data(), got_lse.data(), static_cast<size_t>(rows) * 4), 0);

  // Without an LSE: the same O.
  MergeParams no_lse = m;
  no_lse.o = o_again.ptr;
  no_lse.lse = nullptr;
  ASSERT_EQ(ref::poison(o_again.ptr, q_count * 2, stream_), cudaSuccess);
  ASSERT_TRUE(merge_states(no_lse, stream_).ok());
  ASSERT_TRUE(download(&again_o, o_again.ptr, q_count, stream_));
  EXPECT_EQ(std::memcmp(again_o.data(), got_o.data(), q_count * 2), 0);

  // In place into state 1: the same O and LSE, bitwise.
  MergeParams in_place = m;
  in_place.o = static_cast<char*>(o_states.ptr) + q_count * 2;
  in_place.lse = static_cast<float*>(lse_states.ptr) + rows;
  ASSERT_TRUE(validate(in_place).ok()) << validate(in_place).message;
  ASSERT_TRUE(merge_states(in_place, stream_).ok());
  ASSERT_TRUE(download(&again_o, in_place.o, q_count, stream_));
  ASSERT_TRUE(download(&again_lse, in_place.lse, static_cast<size_t>(rows), stream_));
  EXPECT_EQ(std::memcmp(again_o.data(), got_o.data(), q_count * 2), 0);
  EXPECT_EQ(std::memcmp(again_lse.data(), got_lse.data(), static_cast<size_t>(rows) * 4), 0);
}

// Context parallelism simulated on one GPU: a causal sequence of 2R chunks
// sharded zigzag over R ranks (rank r holds chunks r and 2R-1-r of Q, K and
// V); in ring step t rank r holds the K/V chunks of rank (r - t) mod R and
// attends its Q chunks to them (an earlier chunk in full, its own chunk
// causally, a later one not at all), each pair one attention call writing
// a state; each Q chunk's states are merged and the result compared with
// the unsharded causal call. R = 2, 4, 8.
TEST_F(MergeStates, ZigzagShardsMergeToTheUnshardedCall) {
  const int64_t hd = first_compiled({128, 64});
  ASSERT_NE(hd, 0);
  const DType dtype = DType::kBFloat16;
  const int64_t c = 96, heads_q = 8, heads_kv = 2;
  for (int64_t ranks : {2, 4, 8}) {
    SCOPED_TRACE("ranks " + std::to_string(ranks));
    const int64_t chunks = 2 * ranks, n = chunks * c;
    AttentionParams shape;
    shape.dtype = dtype;
    shape.head_dim = hd;
    shape.batch = 1;
    shape.seqlen_q = shape.seqlen_k = n;
    shape.heads_q = heads_q;
    shape.heads_kv = heads_kv;
    shape.causal = true;
    FullCall call;
    ASSERT_TRUE(call.run(shape, case_seed(7201 + static_cast<uint64_t>(ranks)), stream_));
    const AttentionParams& full = call.params;
    const size_t q_count = call.q_count;
    const size_t chunk_o = static_cast<size_t>(c * heads_q * hd), chunk_lse = static_cast<size_t>(heads_q * c);
    DeviceBuffer o_states, lse_states, o, lse;
    // Q chunk i's states: up to `chunks` of them, one after another.
    ASSERT_EQ(o_states.allocate(static_cast<size_t>(chunks * chunks) * chunk_o * 2), cudaSuccess);
    ASSERT_EQ(lse_states.allocate(static_cast<size_t>(chunks * chunks) * chunk_lse * 4), cudaSuccess);
    ASSERT_EQ(o.allocate(q_count * 2), cudaSuccess);
    ASSERT_EQ(lse.allocate(static_cast<size_t>(chunks) * chunk_lse * 4), cudaSuccess);
    Status st;

    std::vector<int64_t> states(static_cast<size_t>(chunks), 0);
    for (int64_t t = 0; t < ranks; ++t) {
      for (int64_t r = 0; r < ranks; ++r) {
        const int64_t src = (r - t + ranks) % ranks;
        for (int64_t qi : {r, chunks - 1 - r}) {
          for (int64_t kj : {src, chunks - 1 - src}) {
            if (kj > qi) continue;
            AttentionParams part = full;
            part.seqlen_q = part.seqlen_k = c;
            part.causal = kj == qi;
            part.q = static_cast<const char*>(call.q.ptr) + qi * c * full.q_seq_stride * 2;
            part.k = static_cast<const char*>(call.k.ptr) + kj * c * full.k_seq_stride * 2;
            part.v = static_cast<const char*>(call.v.ptr) + kj * c * full.v_seq_stride * 2;
            const int64_t slot = qi * chunks + states[static_cast<size_t>(qi)]++;
            part.o = static_cast<char*>(o_states.ptr) + static_cast<size_t>(slot) * chunk_o * 2;
            part.o_batch_stride = c * heads_q * hd;
            part.lse = static_cast<float*>(lse_states.ptr) + static_cast<size_t>(slot) * chunk_lse;
            st = attention_forward(part, stream_);
            ASSERT_TRUE(st.ok()) << st.message;
          }
        }
      }
    }
    for (int64_t qi = 0; qi < chunks; ++qi) {
      ASSERT_EQ(states[static_cast<size_t>(qi)], qi + 1) << "chunk " << qi << " sees every chunk up to itself once";
      MergeParams m;
      m.dtype = dtype;
      m.num_states = qi + 1;
      m.batch = 1;
      m.seqlen_q = c;
      m.heads = heads_q;
      m.head_dim = hd;
      m.set_contiguous();
      m.o_states = static_cast<const char*>(o_states.ptr) + static_cast<size_t>(qi * chunks) * chunk_o * 2;
      m.lse_states = static_cast<const float*>(lse_states.ptr) + static_cast<size_t>(qi * chunks) * chunk_lse;
      m.o = static_cast<char*>(o.ptr) + static_cast<size_t>(qi) * chunk_o * 2;     // rows qi*c.. of [1, n, H, D]
      m.lse = static_cast<float*>(lse.ptr) + static_cast<size_t>(qi) * chunk_lse;  // [H, c] per chunk
      st = merge_states(m, stream_);
      ASSERT_TRUE(st.ok()) << st.message;
    }
    FullCall::Distance d;
    ASSERT_TRUE(call.distance(o.ptr, &d, stream_));
    std::vector<float> ref_lse, got_lse;
    ASSERT_TRUE(download(&ref_lse, call.lse.ptr, call.lse_count, stream_));
    ASSERT_TRUE(download(&got_lse, lse.ptr, static_cast<size_t>(chunks) * chunk_lse, stream_));
    double lse_err = 0.0;
    for (int64_t qi = 0; qi < chunks; ++qi) {
      for (int64_t h = 0; h < heads_q; ++h) {
        for (int64_t i = 0; i < c; ++i) {
          const double g = got_lse[static_cast<size_t>(qi * heads_q * c + h * c + i)];
          const double r = ref_lse[static_cast<size_t>(h * n + qi * c + i)];
          lse_err = std::fmax(lse_err, std::fabs(g - r));
        }
      }
    }
    EXPECT_LE(d.rel_l2, 1e-2);
    EXPECT_LE(lse_err, 1e-3);
  }
}

}  // namespace
}  // namespace flash::test
