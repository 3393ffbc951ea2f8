// One inference-engine call on the device (varlen Q and/or K/V, a dense KV
// cache with seqused_k, a paged KV cache, sliding window, softcap) and its
// expected output, computed by running the dense references sequence by
// sequence on host-gathered copies of each sequence's rows.
//
// Inputs are generated on the host (so the gather has them) and uploaded:
// every element a call may legitimately read holds a fresh random value;
// everything else in the buffers holds NaN: head/row padding, rows after
// the last sequence of packed tensors (tail_rows), the rows of a dense KV
// cache past seqused_k, the unused rows of a sequence's last page,
// the pages no sequence owns. Block-table entries past the pages a sequence
// uses are -1. So a kernel that reads a key it must not (or multiplies a
// masked probability by an unused value) poisons its output. O and LSE are
// poisoned (NaN) before every run, and so is the split-KV workspace.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "flash/flash.hpp"
#include "gpu_case.h"

namespace flash::test {

// Where the keys and values of a feature case live.
enum class KvLayout {
  kDense,   // [batch, capacity, heads_kv, head_dim]; seqlen_k = capacity
  kVarlen,  // packed [total_k, heads_kv, head_dim] with cu_seqlens_k
  kPaged,   // [num_pages, page_size, heads_kv, head_dim] with a block table
};
const char* kv_layout_name(KvLayout kv);

struct FeatureConfig {
  DType dtype = DType::kBFloat16;
  int64_t head_dim = 128;
  // V and O's width (AttentionParams::head_dim_v); 0: head_dim. Every
  // tensor's head stride holds the wider of the two, so the columns a
  // narrower tensor lacks are padding (NaN in the inputs, unwritten in O).
  int64_t head_dim_v = 0;
  int64_t heads_q = 1;
  int64_t heads_kv = 1;
  // Query rows and keys of each sequence; batch = seqlens_q.size() (and
  // seqlens_k must have as many entries).
  std::vector<int64_t> seqlens_q;
  std::vector<int64_t> seqlens_k;

  // Q and O packed [total_q, heads, head_dim] with cu_seqlens_q, seqlen_q =
  // longest + max_seqlen_q_slack. Otherwise dense [batch, seqlen_q, ...] and
  // every seqlens_q entry must be equal.
  bool varlen_q = false;
  int64_t max_seqlen_q_slack = 0;

  KvLayout kv = KvLayout::kDense;
  // Dense and paged K/V: pass seqused_k = seqlens_k. Without it every
  // seqlens_k entry must be equal (and, dense, equal to the capacity).
  bool use_seqused_k = false;
  int64_t k_capacity = 0;  // dense: keys allocated per sequence (seqlen_k); 0 = the longest sequence
  // Paged: keys per page, whether pages are assigned in a random order (else
  // sequence by sequence, in order), pages no sequence owns, block-table
  // entries per sequence beyond those the longest sequence needs, and
  // block_table_batch_stride - max_pages_per_seq.
  int64_t page_size = 16;
  bool shuffle_pages = true;
  int64_t spare_pages = 3;
  int64_t spare_table_entries = 0;
  int64_t table_stride_pad = 0;
  // Paged with seqused_k: seqlen_k as passed (a hint); 0 = the longest sequence.
  int64_t seqlen_k_hint = 0;

  // Padded head and row strides (and a padded batch / page stride); the
  // padding holds NaN.
  bool padded = false;
  // Packed (varlen) Q/O and K/V: rows allocated after the last sequence's.
  // They hold NaN in Q, K and V, and O's must stay unwritten (total_q and
  // total_k are still exact: these rows are no sequence's).
  int64_t tail_rows = 0;

  bool causal = false;
  int64_t window_left = -1;
  int64_t window_right = -1;
  float softcap = 0.f;
  // Attention sinks: empty for none, else heads_q logits (AttentionParams::sinks).
  std::vector<float> sinks;
  // ALiBi: empty for none, else heads_q slopes (AttentionParams::alibi_slopes).
  std::vector<float> alibi;
  float softmax_scale = 0.f;
  float input_scale = 1.f;  // inputs uniform in [-input_scale, input_scale)
  // Outlier channels: Q's element e (of every row and head) times
  // 2^q_channel_log2[e % size()]; empty for none. Powers of two, so the
  // references see the same scaled values the kernels do.
  std::vector<int> q_channel_log2;
  // FP8 KV cache (AttentionParams::kv_dtype): K and V hold e4m3 bytes drawn
  // uniformly from the finite codes of magnitude <= input_scale (every
  // exponent, subnormals included; the unused elements hold the NaN code
  // 0x7f. The decode kernel reads it as 480 (a wrongly read key shows, a
  // wrongly read value times a zero probability does not); the Hopper
  // kernel widens K and V to fp16, where it is NaN, so there any read of an
  // unused element shows). k_descale /
  // v_descale: none, one factor, or heads_kv factors (descale_head_stride
  // 0 or 1; when both are given, equally many). Powers of two, so that
  // every dequantised value is exact in dtype and the references run on
  // dtype copies of K and V.
  KvDType kv_dtype = KvDType::kSame;
  std::vector<float> k_descale, v_descale;
  bool with_lse = true;
  uint64_t seed = 0;

  int64_t batch() const { return static_cast<int64_t>(seqlens_q.size()); }
  int64_t value_dim() const { return head_dim_v != 0 ? head_dim_v : head_dim; }
  // e.g. "bf16 hd128 h8/2 varlen-q[0,17,...] k:paged48[...] causal window(128,0) softcap 30"
  std::string name() const;
};

// Device memory freed on scope exit (at least 256 bytes, 256-byte aligned).
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();
  cudaError_t allocate(size_t n);
};

// Which dense reference computes each sequence.
enum class SequenceReference {
  kCublas,  // ref::standard_attention, float32 O
  kCpu,     // ref::cpu_attention, float64 (small shapes only)
};

class FeatureCase {
 public:
  FeatureCase(const FeatureConfig& cfg, cudaStream_t stream);
  FeatureCase(const FeatureCase&) = delete;
  FeatureCase& operator=(const FeatureCase&) = delete;

  // Checks the config, allocates, generates and uploads. Must succeed
  // before anything else is called.
  ::testing::AssertionResult init();

  const FeatureConfig& config() const { return cfg_; }
  // The call as flash sees it (backend kAuto, num_splits 0, no workspace;
  // total_q / total_k given, exact, for varlen Q / K: cu_seqlens_q[batch]
  // and cu_seqlens_k[batch]).
  const AttentionParams& params() const { return params_; }
  // The shape check_attention() compares in: [batch, seqlen_q, heads_q,
  // head_dim] for dense Q; one sequence of total_q rows for varlen Q (so the
  // LSE layout [heads_q, total_q] is [1, heads_q, total_q]).
  AttentionParams check_params() const;
  int64_t total_q() const { return rows_; }
  // Rows (query row x head) that see no key, from the config alone.
  int64_t rows_seeing_no_key() const;

  // Poisons O and LSE, fills p.workspace_bytes of the workspace (when
  // p.workspace is set) with the byte `workspace_fill` (0xFF: NaN), then
  // calls flash::attention_forward(p) on the case's stream.
  Status run(const AttentionParams& p, int workspace_fill = 0xFF);
  Status run(Backend backend);
  // Poisons O and the LSE on the case's stream (what run() does first), for
  // a test that then launches a kernel itself.
  cudaError_t poison_outputs();

  // Waits for the stream; O as floats in check_params()' dense layout, and
  // the LSE (empty when the case has none).
  ::testing::AssertionResult read_output(std::vector<float>* o, std::vector<float>* lse);
  // The O buffer's and the LSE's raw bits, for bitwise comparisons.
  ::testing::AssertionResult read_raw(std::vector<uint16_t>* o, std::vector<float>* lse);
  // Nothing in O or the LSE was written (all still poison).
  ::testing::AssertionResult outputs_untouched();
  // Nothing outside O's logical elements was written.
  ::testing::AssertionResult padding_untouched();

  // The expected O and LSE in check_params()' layout: each sequence's rows
  // gathered densely on the host and run through the dense reference with
  // this case's causal, window, softcap and scale.
  ::testing::AssertionResult reference(cublasHandle_t handle, std::vector<double>* o, std::vector<double>* lse,
                                       SequenceReference which = SequenceReference::kCublas);

  // The LSE allowance (check_attention's lse_allowance) of a Q K^T on the
  // e4m3 tensor cores, whose accumulator keeps about 14 bits and truncates
  // (test_fp8_prefill_gpu.cpp; docs/perf/fp8-prefill.md): per row, in
  // check_params()' LSE layout, 2^-10 * scale * max_j sum_t |q_t k_jt| over
  // every key of the sequence, visible or not (dequantised K; the softmax
  // scale before any softcap, which only shrinks an error in the score).
  // Computed on the first call, from the host inputs init() generated.
  const std::vector<double>& e4m3_qk_allowance();

  // Device arrays, for tests that edit them (e.g. seqused_k past the capacity).
  int32_t* seqused_k_device() { return static_cast<int32_t*>(seqused_k_.ptr); }
  cudaStream_t stream() const { return stream_; }

 private:
  struct Placement {  // one tensor: offsets in elements
    int64_t offset = 0, batch_stride = 0, seq_stride = 0, head_stride = 0;
  };
  ::testing::AssertionResult check_config() const;
  void plan();
  // Element offset (head 0) of query row i of sequence b in Q (or O).
  int64_t q_row(const Placement& t, int64_t b, int64_t i) const;
  // Element offset (head 0) of key j of sequence b in K (or V).
  int64_t k_row(const Placement& t, int64_t b, int64_t j) const;
  // Index of query row i of sequence b among check_params()' rows.
  int64_t check_row(int64_t b, int64_t i) const;
  // The LSE index of (sequence b, row i, head h) in check_params()' layout.
  int64_t lse_index(int64_t b, int64_t i, int64_t h) const;
  // Keys the reference gives sequence b (seqlens_k[b]).
  int64_t keys_of(int64_t b) const { return cfg_.seqlens_k[static_cast<size_t>(b)]; }

  FeatureConfig cfg_;
  cudaStream_t stream_;
  int64_t batch_ = 0;
  int64_t seqlen_q_ = 0;  // the dense Q length or max_seqlen_q
  int64_t rows_ = 0;      // Q/O rows: total_q (varlen) or batch * seqlen_q
  int64_t seqlen_k_ = 0;  // as passed to flash
  std::vector<int32_t> cu_q_, cu_k_, seqused_, table_;
  int64_t num_pages_ = 0, max_pages_ = 0, table_stride_ = 0;
  Placement q_, k_, o_;  // V is placed like K in its own buffer
  int64_t q_elements_ = 0, k_elements_ = 0, o_elements_ = 0, lse_elements_ = 0;
  std::vector<uint16_t> q_host_, k_host_, v_host_;  // fp8: K and V dequantised (the references' inputs)
  std::vector<uint8_t> k_host8_, v_host8_;           // fp8: the bytes flash reads
  std::vector<double> e4m3_qk_allowance_;            // e4m3_qk_allowance(), once computed
  DeviceBuffer q_dev_, k_dev_, v_dev_, o_dev_, lse_dev_, cu_q_dev_, cu_k_dev_, seqused_k_, table_dev_, sinks_dev_,
      alibi_dev_, k_descale_dev_, v_descale_dev_;
  AttentionParams params_;
};

// Whether `p` uses a feature Backend::kSm90 does not support: a requested
// split of a call with seqused_k or pages, or varlen Q / K without total_q /
// total_k. (Varlen with the totals, seqused_k, pages of any size, sliding
// windows and softcap it runs.)
bool uses_sm90_unsupported_feature(const AttentionParams& p);

// Whether Backend::kSm90 should run `p` (and match the reference) on this
// device: no unsupported feature, a build and GPU with the Hopper kernel for
// p.head_dim, and tensors TMA can describe (no zero stride over a dimension
// of size > 1, no empty dimension). Otherwise kSm90 must return
// kUnsupported and write nothing.
bool sm90_runs(const AttentionParams& p);

}  // namespace flash::test
