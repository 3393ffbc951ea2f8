// The MLA kernels against a float64 reference on the host: the split-D
// kernel (kernels/decode/mla_kernel.cuh, sm_80 and newer) and the Hopper
// one (kernels/sm90/mla_kernel.cuh, through sm90::run_mla), launched
// directly and through attention_forward, and the split-D kernel's variant
// for 99 KiB devices through a plan made for one. MLA's absorbed decode: Q K^T
// over 576 columns, V the first 512 columns of the same K rows, one K/V
// head for many query heads. Dense and paged caches (pages of 1, 3, 16 and
// 64 keys), ragged lengths through seqused_k, one and several splits,
// causal query tokens, sinks, left windows, a large softmax scale, fp16
// and bf16; the cache rows past each sequence's keys hold NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "decode/api.h"
#include "decode/mla_kernel.cuh"
#include "device_tensor.h"
#include "src/dispatch.h"
#if FLASH_TEST_HAS_SM90
#include "sm90/api.h"
#endif
#include "gpu_case.h"
#include "support/check.h"

namespace flash::test {
namespace {

// Device memory freed on scope exit.
struct Buf {
  void* ptr = nullptr;
  Buf() = default;
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  ~Buf() { cudaFree(ptr); }
  cudaError_t allocate(size_t bytes) { return cudaMalloc(&ptr, bytes < 256 ? 256 : bytes); }
};

constexpr int kHeadDim = 576;
constexpr int kHeadDimV = 512;
using BfTraits = decode::MlaTraits<kHeadDim, kHeadDimV, __nv_bfloat16>;
using HTraits = decode::MlaTraits<kHeadDim, kHeadDimV, __half>;
// Head dim 512 with V rows of its own.
constexpr int kWide = 512;
using WideBfTraits = decode::MlaTraits<kWide, kWide, __nv_bfloat16, true>;
using WideHTraits = decode::MlaTraits<kWide, kWide, __half, true>;

// kApi: flash::attention_forward (on sm_90 the plan takes the Hopper kernel);
// kApiDecode: the same with Backend::kDecode (the split-D kernel);
// kApiSmall: the call planned as for a device with 99 KiB of shared memory
// a block (an sm_89) and that plan launched on this GPU (the split-D
// kernel's variant for such devices, which no larger GPU's plan picks).
enum class MlaKernel { kSplitD, kHopper, kApi, kApiDecode, kApiSmall };

struct MlaCase {
  DType dtype;
  int heads_q;
  int seqlen_q;
  std::vector<int> lens;  // keys per sequence (seqused_k)
  int page_size;          // 0: dense
  int splits;
  bool sinks = false;       // a sink logit per query head
  int head_dim = kHeadDim;  // Q K^T's width the call has (columns past it zero in the kernel)
  float scale = 0.f;        // softmax_scale; 0: 1/sqrt(head_dim)
  int window_left = -1;     // a left window (keys at most this far before the diagonal)
  bool separate_v = false;  // head dim 512, V rows of their own (else MLA: V is K's first 512 columns)
  float softcap = 0.f;      // a logit softcap (0: none)
  bool alibi = false;       // ALiBi slopes, one per query head
  int heads_kv = 1;         // K/V heads (heads_q / heads_kv query heads each)
  bool graph = false;       // attention_forward captured in a CUDA graph, replayed twice
  std::string name() const {
    std::string s = dtype == DType::kBFloat16 ? "bf16" : "fp16";
    s += " heads " + std::to_string(heads_q) + " q " + std::to_string(seqlen_q) + " keys";
    for (int l : lens) s += " " + std::to_string(l);
    s += page_size ? " pages " + std::to_string(page_size) : std::string(" dense");
    s += " splits " + std::to_string(splits) + " head_dim " + std::to_string(head_dim);
    if (scale != 0.f) s += " scale " + std::to_string(scale);
    if (window_left >= 0) s += " window " + std::to_string(window_left);
    if (separate_v) s += " separate V";
    if (softcap > 0.f) s += " softcap " + std::to_string(softcap);
    if (alibi) s += " alibi";
    if (heads_kv > 1) s += " heads_kv " + std::to_string(heads_kv);
    if (graph) s += " graph";
    return sinks ? s + " sinks" : s;
  }
};

class MlaDecode : public GpuTest {
 protected:
  // attention_forward on `a` with a workspace of its size (kept in
  // `workspace`), after checking that flash's choice starts with `expected`;
  // with `graph`, the call captured in a CUDA graph and the graph launched
  // twice (the second launch recomputes the same outputs over the first's).
  void forward(AttentionParams* a, Buf* workspace, const char* expected, bool graph = false) {
    size_t bytes = 0;
    const Status ws = attention_workspace_size(*a, &bytes);
    ASSERT_TRUE(ws.ok()) << ws.message;
    if (bytes > 0) {
      ASSERT_EQ(workspace->allocate(bytes), cudaSuccess);
      a->workspace = workspace->ptr;
      a->workspace_bytes = bytes;
    }
    KernelChoice choice;
    const Status qs = query_kernel_choice(*a, &choice);
    ASSERT_TRUE(qs.ok()) << qs.message;
    EXPECT_EQ(std::string(choice.name).rfind(expected, 0), 0u) << choice.name;
    if (!graph) {
      const Status s = attention_forward(*a, stream_);
      ASSERT_TRUE(s.ok()) << s.message;
      return;
    }
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
    const Status s = attention_forward(*a, stream_);
    cudaGraph_t captured = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &captured);
    ASSERT_TRUE(s.ok()) << s.message;
    ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, captured, 0);
    cudaGraphDestroy(captured);
    ASSERT_EQ(made, cudaSuccess) << cudaGetErrorString(made);
    cudaError_t err = cudaGraphLaunch(exec, stream_);
    if (err == cudaSuccess) err = cudaGraphLaunch(exec, stream_);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream_);
    cudaGraphExecDestroy(exec);
    ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  }

  // kApiSmall: `a` planned for an sm_89 with 99 KiB a block,
  // with a workspace of that plan's size, and launched here; the plan must
  // hold the split-D kernel's variant 1 and describe it as `expected`.
  void launch_as_small_device(AttentionParams* a, Buf* workspace, const char* expected) {
    // Valid but for the workspace, which the plan sizes.
    const Status valid = detail::validate_call(*a, /*check_workspace=*/false);
    ASSERT_TRUE(valid.ok()) << valid.message;
    detail::DeviceCaps caps;
    const Status device = detail::query_device(&caps);
    ASSERT_TRUE(device.ok()) << device.message;
    caps.major = 8;
    caps.minor = 9;
    caps.max_smem = decode::kSmallDeviceSmemBytes;
    caps.smem_per_sm = decode::kSmallDeviceSmemBytes + 1024;
    detail::Plan plan;
    Status planned = detail::make_plan(*a, caps, &plan);
    ASSERT_TRUE(planned.ok()) << planned.message;
    if (plan.workspace_wanted > 0) {
      ASSERT_EQ(workspace->allocate(plan.workspace_wanted), cudaSuccess);
      a->workspace = workspace->ptr;
      a->workspace_bytes = plan.workspace_wanted;
      planned = detail::make_plan(*a, caps, &plan);
      ASSERT_TRUE(planned.ok()) << planned.message;
    }
    const Status complete = validate(*a);
    ASSERT_TRUE(complete.ok()) << complete.message;
    ASSERT_EQ(plan.num_candidates, 1);
    ASSERT_EQ(plan.candidates[0].backend, Backend::kDecode);
    ASSERT_EQ(plan.candidates[0].index, 1);
    if (a->num_splits > 1) EXPECT_EQ(plan.num_splits, a->num_splits);
    KernelChoice choice;
    ASSERT_TRUE(detail::describe(plan, plan.candidates[0], *a, &choice));
    EXPECT_EQ(std::string(choice.name).rfind(expected, 0), 0u) << choice.name;
    const cudaError_t err = detail::launch(plan, plan.candidates[0], *a, stream_);
    ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
  }

  void run(const MlaCase& c, MlaKernel kernel) {
    const bool api =
        kernel == MlaKernel::kApi || kernel == MlaKernel::kApiDecode || kernel == MlaKernel::kApiSmall;
    SCOPED_TRACE(c.name() + (kernel == MlaKernel::kHopper      ? " (sm90)"
                             : kernel == MlaKernel::kApi       ? " (attention_forward)"
                             : kernel == MlaKernel::kApiSmall ? " (planned for 99 KiB, launched)"
                             : api                             ? " (attention_forward, Backend::kDecode)"
                                                               : " (split-D)"));
    const int W = c.separate_v ? kWide : kHeadDim;  // Q and K rows (and V's when separate)
    // attention_forward takes the exact shapes only; the Hopper kernel MLA's only.
    if (api && c.head_dim != W) return;
    if (kernel == MlaKernel::kHopper && c.separate_v) return;
    int device = 0, optin = 0;
    ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), cudaSuccess);
    const int smem = kernel == MlaKernel::kApiSmall ? decode::split_d_smem(c.separate_v, 1)
                     : c.separate_v                 ? WideBfTraits::kSmemBytes
                                                    : BfTraits::kSmemBytes;
    if (optin < smem) GTEST_SKIP() << "needs " << smem << " bytes of shared memory";

    const int batch = static_cast<int>(c.lens.size());
    int max_len = 0;
    for (int l : c.lens) max_len = std::max(max_len, l);
    const int capacity = c.page_size ? ((max_len + c.page_size - 1) / c.page_size) * c.page_size : max_len + 5;
    const int pages_per_seq = c.page_size ? capacity / c.page_size : 0;
    const int num_pages = c.page_size ? batch * pages_per_seq : 0;
    const int64_t k_rows =
        c.page_size ? static_cast<int64_t>(num_pages) * c.page_size : static_cast<int64_t>(batch) * capacity;

    // Host data: Q [batch, seqlen_q, heads_q, W]; K [rows, 1, W]; a separate V [rows, 1, 512] with rows
    // VS apart; O [batch, seqlen_q, heads_q, 512].
    const size_t q_count = static_cast<size_t>(batch) * c.seqlen_q * c.heads_q * W;
    const int H = c.heads_kv, g = c.heads_q / c.heads_kv;  // K/V heads, query heads each
    const size_t k_count = static_cast<size_t>(k_rows) * H * W;
    // A separate V has rows of its own stride (VS, padded past W), so a V
    // read through K's strides or K's offsets would show.
    const int VS = c.separate_v ? W + 64 : W;
    const size_t v_count = static_cast<size_t>(k_rows) * H * VS;
    std::vector<uint16_t> q(q_count), k(k_count), v_sep(c.separate_v ? v_count : 0);
    uint64_t state = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(c.heads_q * 131 + c.page_size * 7 + c.splits);
    auto uniform = [&]() {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>((state >> 40) & 0xffffff) / 8388608.f - 1.f;
    };
    for (auto& x : q) x = ref::from_float(uniform(), c.dtype);
    for (auto& x : k) x = ref::from_float(uniform(), c.dtype);
    for (auto& x : v_sep) x = ref::from_float(uniform(), c.dtype);
    const std::vector<uint16_t>& v = c.separate_v ? v_sep : k;  // V's rows, VS apart
    // Every page once, in a shuffled order (Fisher-Yates).
    std::vector<int> table;
    for (int i = 0; i < num_pages; ++i) table.push_back(i);
    for (int i = num_pages - 1; i > 0; --i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(table[static_cast<size_t>(i)],
                table[static_cast<size_t>((state >> 33) % static_cast<uint64_t>(i + 1))]);
    }
    std::vector<float> sinks;
    for (int h = 0; h < c.heads_q && c.sinks; ++h)
      sinks.push_back(h % 3 == 0 ? -INFINITY : 0.25f * static_cast<float>(h % 7));
    std::vector<float> slopes;
    for (int h = 0; h < c.heads_q && c.alibi; ++h)
      slopes.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(c.heads_q)));
    auto key_row = [&](int b, int j) -> int64_t {
      if (!c.page_size) return static_cast<int64_t>(b) * capacity + j;
      return static_cast<int64_t>(table[static_cast<size_t>(b * pages_per_seq + j / c.page_size)]) * c.page_size +
             j % c.page_size;
    };
    // The rows a sequence owns past its keys (its cache's room, its last
    // page's tail) hold NaN: a kernel that lets one into O, even times a
    // zero weight, fails.
    const uint16_t nan_bits = ref::from_float(std::numeric_limits<float>::quiet_NaN(), c.dtype);
    for (int b = 0; b < batch; ++b) {
      for (int j = c.lens[static_cast<size_t>(b)]; j < capacity; ++j) {
        for (int h = 0; h < H; ++h) {
          for (int col = 0; col < W; ++col) k[(static_cast<size_t>(key_row(b, j)) * H + h) * W + col] = nan_bits;
          for (int col = 0; col < VS && c.separate_v; ++col) {
            v_sep[(static_cast<size_t>(key_row(b, j)) * H + h) * VS + col] = nan_bits;
          }
        }
      }
    }

    Buf q_dev, k_dev, v_dev, o_dev, lse_dev, used_dev, table_dev, o_part, lse_part, sinks_dev, slopes_dev;
    ASSERT_EQ(q_dev.allocate(q_count * 2), cudaSuccess);
    ASSERT_EQ(k_dev.allocate(k_count * 2), cudaSuccess);
    if (c.separate_v) {
      ASSERT_EQ(v_dev.allocate(v_count * 2), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(v_dev.ptr, v_sep.data(), v_count * 2, stream_), cudaSuccess);
    }
    void* const v_ptr = c.separate_v ? v_dev.ptr : k_dev.ptr;
    const size_t o_count = static_cast<size_t>(batch) * c.seqlen_q * c.heads_q * kHeadDimV;
    const size_t rows = static_cast<size_t>(batch) * c.heads_q * c.seqlen_q;
    ASSERT_EQ(o_dev.allocate(o_count * 2), cudaSuccess);
    ASSERT_EQ(lse_dev.allocate(rows * 4), cudaSuccess);
    ASSERT_EQ(used_dev.allocate(c.lens.size() * 4), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(q_dev.ptr, q.data(), q_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(k_dev.ptr, k.data(), k_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(used_dev.ptr, c.lens.data(), c.lens.size() * 4, stream_), cudaSuccess);
    if (c.page_size) {
      ASSERT_EQ(table_dev.allocate(table.size() * 4), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(table_dev.ptr, table.data(), table.size() * 4, stream_), cudaSuccess);
    }
    if (c.sinks) {
      ASSERT_EQ(sinks_dev.allocate(sinks.size() * 4), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(sinks_dev.ptr, sinks.data(), sinks.size() * 4, stream_), cudaSuccess);
    }
    if (c.alibi) {
      ASSERT_EQ(slopes_dev.allocate(slopes.size() * 4), cudaSuccess);
      ASSERT_EQ(ref::upload_sync(slopes_dev.ptr, slopes.data(), slopes.size() * 4, stream_), cudaSuccess);
    }
    if (c.splits > 1) {
      ASSERT_EQ(o_part.allocate(static_cast<size_t>(c.splits) * rows * W * 4), cudaSuccess);
      ASSERT_EQ(lse_part.allocate(static_cast<size_t>(c.splits) * rows * 4), cudaSuccess);
    }
    ASSERT_EQ(ref::poison(o_dev.ptr, o_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::poison(lse_dev.ptr, rows * 4, stream_), cudaSuccess);

    detail::FwdParams f{};
    f.q = q_dev.ptr;
    f.k = k_dev.ptr;
    f.v = v_ptr;  // MLA: the K rows (V is their first 512 columns)
    f.o = o_dev.ptr;
    f.lse = static_cast<float*>(lse_dev.ptr);
    f.q_head_stride = W;
    f.q_seq_stride = static_cast<int64_t>(c.heads_q) * W;
    f.q_batch_stride = f.q_seq_stride * c.seqlen_q;
    f.k_head_stride = W;
    f.k_seq_stride = static_cast<int64_t>(H) * W;
    f.k_batch_stride = (c.page_size ? c.page_size : capacity) * f.k_seq_stride;
    f.v_head_stride = VS;
    f.v_seq_stride = static_cast<int64_t>(H) * VS;
    f.v_batch_stride = (c.page_size ? c.page_size : capacity) * f.v_seq_stride;
    f.o_head_stride = kHeadDimV;
    f.o_seq_stride = static_cast<int64_t>(c.heads_q) * kHeadDimV;
    f.o_batch_stride = f.o_seq_stride * c.seqlen_q;
    f.batch = batch;
    f.seqlen_q = c.seqlen_q;
    f.seqlen_k = capacity;
    f.heads_q = c.heads_q;
    f.heads_kv = H;
    f.q_per_kv = g;
    f.head_dim = c.head_dim;
    f.head_dim_v = kHeadDimV;
    f.sinks = c.sinks ? static_cast<const float*>(sinks_dev.ptr) : nullptr;
    f.num_sms = 132;
    f.cc_major = 9;
    const float scale = c.scale != 0.f ? c.scale : 1.f / std::sqrt(static_cast<float>(c.head_dim));
    f.softmax_scale = scale;
    f.softmax_scale_log2 = f.softmax_scale * 1.4426950408889634f;
    // What make_fwd_params does with a softcap: tanh(s * scale / cap) goes
    // through the softmax with scale cap.
    f.softcap = c.softcap;
    if (c.softcap > 0.f) {
      f.softcap_prescale = scale / c.softcap;
      f.softmax_scale = c.softcap;
      f.softmax_scale_log2 = c.softcap * 1.4426950408889634f;
    }
    f.alibi_slopes = c.alibi ? static_cast<const float*>(slopes_dev.ptr) : nullptr;
    f.seqused_k = static_cast<const int*>(used_dev.ptr);
    f.block_table = c.page_size ? static_cast<const int*>(table_dev.ptr) : nullptr;
    f.block_table_batch_stride = pages_per_seq;
    f.num_pages = num_pages;
    f.page_size = c.page_size ? c.page_size : 1;
    f.page_shift = -1;
    for (int shift = 0; shift < 31; ++shift) {
      if (c.page_size == (1 << shift)) f.page_shift = shift;
    }
    f.max_seqlen_k_alloc = capacity;
    f.window_left = c.window_left;
    f.window_right = c.seqlen_q > 1 ? 0 : -1;  // causal, bottom-right aligned
    f.alibi_scale = 1.f / f.softmax_scale;
    f.num_splits = c.splits;
    f.o_partial = static_cast<float*>(o_part.ptr);
    f.lse_partial = static_cast<float*>(lse_part.ptr);

    cudaError_t err = cudaErrorNotSupported;
    Buf workspace;
    if (api) {
      AttentionParams a;
      if (kernel == MlaKernel::kApiDecode) a.backend = Backend::kDecode;
      a.dtype = c.dtype;
      a.q = q_dev.ptr;
      a.k = k_dev.ptr;
      a.v = v_ptr;
      a.o = o_dev.ptr;
      a.lse = static_cast<float*>(lse_dev.ptr);
      a.batch = batch;
      a.seqlen_q = c.seqlen_q;
      a.seqlen_k = capacity;
      a.heads_q = c.heads_q;
      a.heads_kv = H;
      a.head_dim = W;
      a.head_dim_v = kHeadDimV;
      a.q_batch_stride = f.q_batch_stride, a.q_seq_stride = f.q_seq_stride, a.q_head_stride = f.q_head_stride;
      a.k_batch_stride = f.k_batch_stride, a.v_batch_stride = f.v_batch_stride;
      a.k_seq_stride = f.k_seq_stride, a.v_seq_stride = f.v_seq_stride;
      a.k_head_stride = f.k_head_stride, a.v_head_stride = f.v_head_stride;
      a.o_batch_stride = f.o_batch_stride, a.o_seq_stride = f.o_seq_stride, a.o_head_stride = f.o_head_stride;
      a.softmax_scale = scale;
      a.softcap = c.softcap;
      a.alibi_slopes = f.alibi_slopes;
      a.causal = c.seqlen_q > 1;
      a.window_left = c.window_left;
      a.seqused_k = f.seqused_k;
      if (c.page_size) {
        a.block_table = f.block_table;
        a.block_table_batch_stride = pages_per_seq;
        a.max_pages_per_seq = pages_per_seq;
        a.page_size = c.page_size;
        a.num_pages = num_pages;
      }
      a.sinks = f.sinks;
      a.num_splits = c.splits == 1 ? 0 : c.splits;  // 0: flash's own choice
      if (kernel == MlaKernel::kApiSmall) {
        launch_as_small_device(&a, &workspace, c.separate_v ? "decode hd512 16x16 4w 2st" : "decode mla 16x32 4w 2st");
      } else {
        forward(&a, &workspace,
                c.separate_v                       ? "decode hd512"
                : kernel == MlaKernel::kApiDecode ? "decode mla"
                                                  : "sm90 mla",
                c.graph);
      }
      if (HasFatalFailure()) return;
      err = cudaSuccess;
    } else if (kernel == MlaKernel::kSplitD) {
      if (c.separate_v) {
        err = c.dtype == DType::kBFloat16 ? decode::run_mla<WideBfTraits>(f, stream_)
                                          : decode::run_mla<WideHTraits>(f, stream_);
      } else {
        err = c.dtype == DType::kBFloat16 ? decode::run_mla<BfTraits>(f, stream_)
                                          : decode::run_mla<HTraits>(f, stream_);
      }
    } else {
#if FLASH_TEST_HAS_SM90
      err = c.dtype == DType::kBFloat16 ? sm90::run_mla<DType::kBFloat16>(f, stream_)
                                        : sm90::run_mla<DType::kFloat16>(f, stream_);
#endif
    }
    ASSERT_EQ(err, cudaSuccess) << cudaGetErrorString(err);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<uint16_t> o_raw(o_count);
    std::vector<float> lse(rows);
    ASSERT_EQ(cudaMemcpy(o_raw.data(), o_dev.ptr, o_count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(lse.data(), lse_dev.ptr, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> o(o_count);
    for (size_t x = 0; x < o_count; ++x) o[x] = ref::to_float(o_raw[x], c.dtype);

    // float64 reference: O [batch, seqlen_q, heads_q, 512], LSE [batch, heads_q, seqlen_q].
    std::vector<double> ref_o(o_count, 0.0), ref_lse(rows, -INFINITY);
    std::vector<double> scores;
    for (int b = 0; b < batch; ++b) {
      const int len_k = c.lens[static_cast<size_t>(b)];
      for (int i = 0; i < c.seqlen_q; ++i) {
        const int diag = i + len_k - c.seqlen_q;  // bottom-right aligned
        const int last = c.seqlen_q > 1 ? diag : len_k - 1;  // causal with several query tokens
        const int first = c.window_left >= 0 ? std::max(0, diag - c.window_left) : 0;
        for (int h = 0; h < c.heads_q; ++h) {
          const size_t q0 = ((static_cast<size_t>(b) * c.seqlen_q + i) * c.heads_q + h) * W;
          const int n = std::min(last, len_k - 1) + 1;  // keys [first, n) are visible
          const double sink = c.sinks ? sinks[static_cast<size_t>(h)] : -INFINITY;
          if (n - first <= 0) {
            ref_lse[(static_cast<size_t>(b) * c.heads_q + h) * c.seqlen_q + i] = sink;
            continue;
          }
          scores.assign(static_cast<size_t>(n - first), 0.0);
          double m = -INFINITY;
          for (int j = first; j < n; ++j) {
            const size_t k0 = (static_cast<size_t>(key_row(b, j)) * H + h / g) * W;
            double dot = 0;
            for (int d = 0; d < c.head_dim; ++d) {
              dot += static_cast<double>(ref::to_float(q[q0 + d], c.dtype)) * ref::to_float(k[k0 + d], c.dtype);
            }
            double sc = dot * scale;
            if (c.softcap > 0.f) sc = c.softcap * std::tanh(sc / c.softcap);
            if (c.alibi) sc -= slopes[static_cast<size_t>(h)] * std::abs(diag - j);
            scores[static_cast<size_t>(j - first)] = sc;
            m = std::max(m, scores[static_cast<size_t>(j - first)]);
          }
          double l = 0;
          for (double& s : scores) l += (s = std::exp(s - m));
          if (c.sinks) l += std::exp(sink - m);  // in the denominator only
          const size_t o0 = ((static_cast<size_t>(b) * c.seqlen_q + i) * c.heads_q + h) * kHeadDimV;
          for (int j = first; j < n; ++j) {
            const size_t v0 = (static_cast<size_t>(key_row(b, j)) * H + h / g) * VS;
            const double w = scores[static_cast<size_t>(j - first)] / l;
            for (int d = 0; d < kHeadDimV; ++d) ref_o[o0 + d] += w * ref::to_float(v[v0 + d], c.dtype);
          }
          ref_lse[(static_cast<size_t>(b) * c.heads_q + h) * c.seqlen_q + i] = m + std::log(l);
        }
      }
    }
    AttentionParams shape;
    shape.dtype = c.dtype;
    shape.batch = batch;
    shape.seqlen_q = c.seqlen_q;
    shape.heads_q = c.heads_q;
    shape.head_dim = W;
    shape.head_dim_v = kHeadDimV;
    EXPECT_TRUE(check_attention(shape, o, lse, ref_o, ref_lse));
  }

  // Varlen MLA through attention_forward: Q, O packed [total_q, heads_q,
  // ...] (cu_seqlens_q), K packed [total_k, heads_kv, 576] (cu_seqlens_k),
  // V its first 512 columns, causal (bottom-right) query tokens, flash's
  // own splits. `backend`: kAuto (the Hopper MLA kernel on sm_90) or
  // kDecode (the split-D kernel).
  void run_varlen(DType dtype, int heads_q, int heads_kv, const std::vector<int>& q_lens,
                  const std::vector<int>& k_lens, Backend backend) {
    const int W = kHeadDim, H = heads_kv, g = heads_q / heads_kv;
    const int batch = static_cast<int>(q_lens.size());
    std::string name = std::string(dtype == DType::kBFloat16 ? "bf16" : "fp16") + " varlen heads " +
                       std::to_string(heads_q) + "/" + std::to_string(heads_kv) + " q";
    for (int l : q_lens) name += " " + std::to_string(l);
    name += " keys";
    for (int l : k_lens) name += " " + std::to_string(l);
    SCOPED_TRACE(name + (backend == Backend::kDecode ? " (Backend::kDecode)" : " (Backend::kAuto)"));
    std::vector<int> cu_q{0}, cu_k{0};
    for (int b = 0; b < batch; ++b) {
      cu_q.push_back(cu_q.back() + q_lens[static_cast<size_t>(b)]);
      cu_k.push_back(cu_k.back() + k_lens[static_cast<size_t>(b)]);
    }
    const int total_q = cu_q.back(), total_k = cu_k.back();
    const int max_q = *std::max_element(q_lens.begin(), q_lens.end());
    const int max_k = *std::max_element(k_lens.begin(), k_lens.end());
    const size_t q_count = static_cast<size_t>(total_q) * heads_q * W;
    const size_t k_count = static_cast<size_t>(total_k) * H * W;
    const size_t o_count = static_cast<size_t>(total_q) * heads_q * kHeadDimV;
    const size_t rows = static_cast<size_t>(total_q) * heads_q;
    std::vector<uint16_t> q(q_count), k(k_count);
    uint64_t state = 0x2545f4914f6cdd1dull ^ static_cast<uint64_t>(heads_q * 37 + total_k);
    auto uniform = [&]() {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return static_cast<float>((state >> 40) & 0xffffff) / 8388608.f - 1.f;
    };
    for (auto& x : q) x = ref::from_float(uniform(), dtype);
    for (auto& x : k) x = ref::from_float(uniform(), dtype);

    Buf q_dev, k_dev, o_dev, lse_dev, cu_q_dev, cu_k_dev, workspace;
    ASSERT_EQ(q_dev.allocate(q_count * 2), cudaSuccess);
    ASSERT_EQ(k_dev.allocate(k_count * 2), cudaSuccess);
    ASSERT_EQ(o_dev.allocate(o_count * 2), cudaSuccess);
    ASSERT_EQ(lse_dev.allocate(rows * 4), cudaSuccess);
    ASSERT_EQ(cu_q_dev.allocate(cu_q.size() * 4), cudaSuccess);
    ASSERT_EQ(cu_k_dev.allocate(cu_k.size() * 4), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(q_dev.ptr, q.data(), q_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(k_dev.ptr, k.data(), k_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(cu_q_dev.ptr, cu_q.data(), cu_q.size() * 4, stream_), cudaSuccess);
    ASSERT_EQ(ref::upload_sync(cu_k_dev.ptr, cu_k.data(), cu_k.size() * 4, stream_), cudaSuccess);
    ASSERT_EQ(ref::poison(o_dev.ptr, o_count * 2, stream_), cudaSuccess);
    ASSERT_EQ(ref::poison(lse_dev.ptr, rows * 4, stream_), cudaSuccess);

    const float scale = 1.f / std::sqrt(192.f);  // DeepSeek's 1/sqrt(128 + 64), not 1/sqrt(576)
    AttentionParams a;
    a.backend = backend;
    a.dtype = dtype;
    a.q = q_dev.ptr;
    a.k = k_dev.ptr;
    a.v = k_dev.ptr;  // V: the first 512 columns of K's rows
    a.o = o_dev.ptr;
    a.lse = static_cast<float*>(lse_dev.ptr);
    a.batch = batch;
    a.seqlen_q = max_q;
    a.seqlen_k = max_k;
    a.heads_q = heads_q;
    a.heads_kv = H;
    a.head_dim = W;
    a.head_dim_v = kHeadDimV;
    a.q_seq_stride = static_cast<int64_t>(heads_q) * W, a.q_head_stride = W;
    a.k_seq_stride = a.v_seq_stride = static_cast<int64_t>(H) * W;
    a.k_head_stride = a.v_head_stride = W;
    a.o_seq_stride = static_cast<int64_t>(heads_q) * kHeadDimV, a.o_head_stride = kHeadDimV;
    a.cu_seqlens_q = static_cast<const int32_t*>(cu_q_dev.ptr);
    a.cu_seqlens_k = static_cast<const int32_t*>(cu_k_dev.ptr);
    a.total_q = total_q;
    a.total_k = total_k;
    a.softmax_scale = scale;
    a.causal = true;
    forward(&a, &workspace, backend == Backend::kDecode ? "decode mla" : "sm90 mla");
    if (HasFatalFailure()) return;
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<uint16_t> o_raw(o_count);
    std::vector<float> lse(rows);
    ASSERT_EQ(cudaMemcpy(o_raw.data(), o_dev.ptr, o_count * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(lse.data(), lse_dev.ptr, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<float> o(o_count);
    for (size_t x = 0; x < o_count; ++x) o[x] = ref::to_float(o_raw[x], dtype);

    // float64 reference: O [total_q, heads_q, 512], LSE [heads_q, total_q].
    std::vector<double> ref_o(o_count, 0.0), ref_lse(rows, -INFINITY), scores;
    for (int b = 0; b < batch; ++b) {
      const int len_q = q_lens[static_cast<size_t>(b)], len_k = k_lens[static_cast<size_t>(b)];
      for (int i = 0; i < len_q; ++i) {
        const int t = cu_q[static_cast<size_t>(b)] + i;
        const int n = std::min(i + len_k - len_q, len_k - 1) + 1;  // keys [0, n) are visible
        for (int h = 0; h < heads_q; ++h) {
          if (n <= 0) continue;
          const size_t q0 = (static_cast<size_t>(t) * heads_q + h) * W;
          scores.assign(static_cast<size_t>(n), 0.0);
          double m = -INFINITY;
          for (int j = 0; j < n; ++j) {
            const size_t k0 = (static_cast<size_t>(cu_k[static_cast<size_t>(b)] + j) * H + h / g) * W;
            double dot = 0;
            for (int d = 0; d < W; ++d) {
              dot += static_cast<double>(ref::to_float(q[q0 + d], dtype)) * ref::to_float(k[k0 + d], dtype);
            }
            scores[static_cast<size_t>(j)] = dot * scale;
            m = std::max(m, scores[static_cast<size_t>(j)]);
          }
          double l = 0;
          for (double& x : scores) l += (x = std::exp(x - m));
          const size_t o0 = (static_cast<size_t>(t) * heads_q + h) * kHeadDimV;
          for (int j = 0; j < n; ++j) {
            const size_t v0 = (static_cast<size_t>(cu_k[static_cast<size_t>(b)] + j) * H + h / g) * W;
            const double w = scores[static_cast<size_t>(j)] / l;
            for (int d = 0; d < kHeadDimV; ++d) ref_o[o0 + d] += w * ref::to_float(k[v0 + d], dtype);
          }
          ref_lse[static_cast<size_t>(h) * total_q + t] = m + std::log(l);
        }
      }
    }
    // check_attention's dense layout with batch 1 and seqlen_q = total_q is
    // the packed one: O [total_q, heads_q, 512], LSE [heads_q, total_q].
    AttentionParams shape;
    shape.dtype = dtype;
    shape.batch = 1;
    shape.seqlen_q = total_q;
    shape.heads_q = heads_q;
    shape.head_dim = W;
    shape.head_dim_v = kHeadDimV;
    EXPECT_TRUE(check_attention(shape, o, lse, ref_o, ref_lse));
  }

  // FLASH_MLA_QUICK (scripts/sanitize.sh): bf16 only, and not the 128-head
  // cases, whose host reference and sanitized kernels take the longest.
  void run_all(MlaKernel kernel) {
    const bool quick = std::getenv("FLASH_MLA_QUICK") != nullptr;
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      if (quick && dtype == DType::kFloat16) break;
      // Ragged lengths, one of them shorter than a block and one of a single key.
      run({dtype, 16, 1, {700, 33, 1}, 0, 1}, kernel);
      run({dtype, 16, 1, {700, 33, 1}, 64, 1}, kernel);
      run({dtype, 16, 1, {700, 33, 1}, 1, 3}, kernel);
      if (!quick) {
        run({dtype, 128, 1, {1500, 257}, 64, 4}, kernel);
        run({dtype, 128, 1, {1500, 257}, 64, 1}, kernel);  // two row blocks a sequence
      }
      run({dtype, 32, 2, {401, 2}, 64, 1}, kernel);      // two causal query tokens
      run({dtype, 32, 2, {401, 64}, 0, 5}, kernel);
      // Four heads a token, five causal tokens: a CTA's rows span tokens.
      run({dtype, 4, 5, {300, 6, 90}, 3, 1}, kernel);            // pages of 3 keys (no power of two)
      run({dtype, 4, 5, {300, 6, 90}, 0, 2, true}, kernel);      // sinks, split: the combine counts them
      run({dtype, 16, 1, {500, 17}, 16, 1, true, 520}, kernel);  // sinks; Q K^T over 520 columns
      // A large scale: row maxima keep growing past the lazy max's 2^8, so
      // O is rescaled mid-sequence.
      run({dtype, 64, 1, {900, 130}, 64, 1, false, kHeadDim, 2.f}, kernel);
      // A left window of 100 keys, whole and split; pages of 16.
      run({dtype, 16, 1, {700, 60}, 16, 1, false, kHeadDim, 0.f, 100}, kernel);
      run({dtype, 16, 3, {700, 60}, 16, 3, true, kHeadDim, 0.f, 100}, kernel);
      // Score modifiers: a softcap that bites (scale 1, cap 5), ALiBi with
      // sinks and splits, both under causal tokens and a window.
      run({dtype, 16, 1, {700, 33, 1}, 64, 1, false, kHeadDim, 1.f, -1, false, 5.f}, kernel);
      run({dtype, 16, 1, {700, 33, 1}, 0, 3, true, kHeadDim, 0.f, -1, false, 0.f, true}, kernel);
      run({dtype, 4, 5, {300, 6, 90}, 16, 1, false, kHeadDim, 0.5f, 100, false, 20.f, true}, kernel);
      if (!quick) run({dtype, 128, 1, {1500, 257}, 64, 2, false, kHeadDim, 0.f, -1, false, 0.f, true}, kernel);
      // Two and three K/V heads (GQA over MLA's rows), causal tokens, splits.
      run({dtype, 8, 2, {401, 64}, 16, 1, false, kHeadDim, 0.f, -1, false, 0.f, false, 2}, kernel);
      run({dtype, 12, 1, {700, 33, 1}, 0, 3, true, kHeadDim, 0.f, -1, false, 0.f, true, 3}, kernel);
      run({dtype, 8, 1, {300, 90}, 3, 2, false, kWide, 0.f, -1, true, 0.f, false, 2}, kernel);
      // Head dim 512, V rows of their own (the split-D kernel only).
      run({dtype, 8, 1, {700, 33, 1}, 0, 1, false, kWide, 0.f, -1, true}, kernel);
      run({dtype, 8, 1, {700, 33, 1}, 16, 3, true, kWide, 0.f, -1, true}, kernel);
      run({dtype, 4, 5, {300, 6, 90}, 3, 1, false, kWide, 0.f, -1, true}, kernel);
      run({dtype, 8, 64, {300}, 64, 1, false, kWide, 0.f, 100, true}, kernel);  // 64 causal queries, windowed
      run({dtype, 8, 1, {700, 33, 1}, 16, 2, true, kWide, 1.f, -1, true, 5.f, true}, kernel);
      // Through attention_forward in a CUDA graph: splits, so the combine
      // is captured after the attention kernel (attention_forward only;
      // the direct launches run uncaptured).
      run({dtype, 16, 1, {700, 33, 1}, 64, 3, true, kHeadDim, 0.f, -1, false, 0.f, false, 1, true}, kernel);
      if (HasFatalFailure()) return;
    }
  }
};

TEST_F(MlaDecode, SplitDMatchesAFloat64Reference) { run_all(MlaKernel::kSplitD); }

TEST_F(MlaDecode, HopperMatchesAFloat64Reference) {
#if FLASH_TEST_HAS_SM90
  int device = 0, major = 0, minor = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), cudaSuccess);
  if (major != 9 || minor != 0) GTEST_SKIP() << "the Hopper MLA kernel is built for sm_90a only";
  run_all(MlaKernel::kHopper);
#else
  GTEST_SKIP() << "built without sm_90a";
#endif
}

// The same cases through flash::attention_forward (plan, workspace, splits
// of flash's choice where the case asks for one).
TEST_F(MlaDecode, AttentionForwardRunsTheHopperKernel) {
#if FLASH_TEST_HAS_SM90
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  if (major != 9) GTEST_SKIP() << "the Hopper MLA kernel runs on sm_90 only";
  run_all(MlaKernel::kApi);
#else
  GTEST_SKIP() << "built without sm_90a";
#endif
}

TEST_F(MlaDecode, AttentionForwardRunsTheSplitDKernel) { run_all(MlaKernel::kApiDecode); }

// Devices with 99 KiB of shared memory a block (sm_86, sm_89): MLA on two
// stages, head dim 512 on 16-key blocks (the split-D kernel's variant 1),
// planned as for such a device and launched on this one, every case above.
TEST_F(MlaDecode, NinetyNineKibDevicesRunTheSplitDVariant) { run_all(MlaKernel::kApiSmall); }

// Varlen MLA (cu_seqlens_q / cu_seqlens_k, several query tokens a sequence,
// causal rows that see no key, one and two K/V heads) on both kernels.
TEST_F(MlaDecode, AttentionForwardRunsVarlenMla) {
  int device = 0, major = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), cudaSuccess);
  std::vector<Backend> backends{Backend::kDecode};
  if (FLASH_TEST_HAS_SM90 && major == 9) backends.push_back(Backend::kAuto);
  for (Backend backend : backends) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
      run_varlen(dtype, 16, 1, {1, 3, 2, 3}, {700, 33, 90, 1}, backend);  // last: two rows see no key
      run_varlen(dtype, 8, 2, {2, 1, 4}, {300, 5, 1000}, backend);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace flash::test
