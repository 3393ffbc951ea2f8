// flash._flash: the nanobind extension behind the Python package. It takes
// DLPack tensors (PyTorch, CuPy, JAX, ...) zero-copy, fills a
// flash::AttentionParams from their shapes and strides, and calls the C++
// API. It allocates nothing: the Python layer (flash/__init__.py) passes
// every output and the workspace, allocated by the inputs' framework.
//
// Layouts (strides are the tensors' own; the last dimension must be
// contiguous):
//   q, out     [batch, seqlen_q, heads_q, head_dim], or [total_q, heads_q, head_dim] with cu_seqlens_q
//   k, v       [batch, seqlen_k, heads_kv, head_dim], [total_k, heads_kv, head_dim] with cu_seqlens_k,
//              or [num_pages, page_size, heads_kv, head_dim] with block_table [batch, max_pages_per_seq]
//   v and out may have a last dimension of their own (head_dim_v: DeepSeek's 192 / 128)
//   lse        float32 [batch, heads_q, seqlen_q], or [heads_q, total_q] with cu_seqlens_q
//   cu_seqlens_q/k int32 [batch + 1], seqused_k int32 [batch]
//   fp8 KV cache: k and v float8_e4m3fn (DLPack kDLFloat8_e4m3fn, code 10), or uint8 (their bytes) with
//              kv_dtype="float8_e4m3fn"; q and out stay float16 / bfloat16. k_descale / v_descale
//              float32 [1] (one factor) or [heads_kv] (one per K/V head), optional
//   FP8 prefill: q too float8_e4m3fn, or uint8 with q_dtype="float8_e4m3fn", and an fp8 cache; out
//              float16 / bfloat16 (out's dtype, or out_dtype without out: default bfloat16);
//              q_descale like k_descale
#include <cuda_runtime_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "flash/flash.hpp"
#include "flash/version.h"

namespace nb = nanobind;

namespace {

using AnyArray = nb::ndarray<>;

// O of a call built without `out` (planning: workspace_size, kernel_choice,
// validate): an address no device allocation has, never written.
void* const kStandInO = reinterpret_cast<void*>(uintptr_t{1} << 60);

// The library's errors as Python exceptions: a rejected argument is a
// ValueError; what this build or GPU cannot run, and a CUDA failure, a
// RuntimeError (the message says which).
void raise_if_failed(const flash::Status& s) {
  if (s.ok()) return;
  switch (s.code) {
    case flash::StatusCode::kInvalidArgument: throw nb::value_error(s.message);
    default: throw std::runtime_error(s.message);
  }
}

[[noreturn]] void bad(const std::string& what) { throw nb::value_error(what.c_str()); }

bool is_dtype(const AnyArray& a, nb::dlpack::dtype_code code, int bits) {
  const nb::dlpack::dtype d = a.dtype();
  return d.code == static_cast<uint8_t>(code) && d.bits == bits && d.lanes == 1;
}

// DLPack 1.1's kDLFloat8_e4m3fn (OCP e4m3, PyTorch's float8_e4m3fn). Spelled
// as a number: nanobind 2.0's dtype_code has no fp8 codes (3.x names this one
// Float8_E4M3FN), and pyproject.toml takes nanobind >= 2.0.
constexpr uint8_t kDLFloat8E4M3FN = 10;

bool is_float8_e4m3fn(const AnyArray& a) {
  const nb::dlpack::dtype d = a.dtype();
  return d.code == kDLFloat8E4M3FN && d.bits == 8 && d.lanes == 1;
}

flash::DType element_type(const AnyArray& a, const char* name) {
  if (is_dtype(a, nb::dlpack::dtype_code::Float, 16)) return flash::DType::kFloat16;
  if (is_dtype(a, nb::dlpack::dtype_code::Bfloat, 16)) return flash::DType::kBFloat16;
  bad(std::string(name) + " must be float16 or bfloat16");
}

// Whether q holds e4m3 values (the FP8 prefill): dtype float8_e4m3fn, or
// uint8 bytes with the keyword q_dtype='float8_e4m3fn' (as kv_dtype for k
// and v).
bool q_is_e4m3(const AnyArray& q, const std::optional<std::string>& q_dtype) {
  const bool fp8 = is_float8_e4m3fn(q), u8 = is_dtype(q, nb::dlpack::dtype_code::UInt, 8);
  if (q_dtype.has_value()) {
    if (*q_dtype != "float8_e4m3fn") bad("q_dtype must be None or 'float8_e4m3fn'; got '" + *q_dtype + "'");
    if (!fp8 && !u8) bad("q_dtype='float8_e4m3fn' needs q of dtype float8_e4m3fn or uint8 (its e4m3 bytes)");
    return true;
  }
  if (u8) {
    bad("q is uint8: if it holds e4m3 bytes, pass q_dtype='float8_e4m3fn' (the FP8 prefill); otherwise it must be "
        "float16 or bfloat16");
  }
  return fp8;
}

// O's element type for an e4m3 q: out's dtype, or the keyword out_dtype
// (default bfloat16) where no out is given.
flash::DType fp8_out_type(const std::optional<AnyArray>& out, const std::optional<std::string>& out_dtype) {
  std::optional<flash::DType> named;
  if (out_dtype.has_value()) {
    if (*out_dtype == "bfloat16") named = flash::DType::kBFloat16;
    else if (*out_dtype == "float16") named = flash::DType::kFloat16;
    else bad("out_dtype must be None, 'bfloat16' or 'float16'; got '" + *out_dtype + "'");
  }
  if (!out.has_value()) return named.value_or(flash::DType::kBFloat16);
  const flash::DType o = element_type(*out, "out");
  if (named.has_value() && *named != o) bad("out_dtype does not match out's dtype");
  return o;
}

// K's and V's element type: q's dtype (kSame) or an fp8 cache (kFloat8E4M3).
// kv_dtype is the keyword of that name: None takes the tensors' own dtype
// (float8_e4m3fn is an fp8 cache); "float8_e4m3fn" says that k and v hold
// e4m3 bytes, as float8_e4m3fn or as uint8 (a framework that cannot export
// fp8 through DLPack passes a uint8 view of its tensors).
flash::KvDType kv_element_type(const AnyArray& k, const AnyArray& v, flash::DType dtype,
                               const std::optional<std::string>& kv_dtype, bool q_e4m3) {
  const bool k_fp8 = is_float8_e4m3fn(k), v_fp8 = is_float8_e4m3fn(v);
  const bool k_u8 = is_dtype(k, nb::dlpack::dtype_code::UInt, 8), v_u8 = is_dtype(v, nb::dlpack::dtype_code::UInt, 8);
  if (kv_dtype.has_value()) {
    if (*kv_dtype != "float8_e4m3fn") bad("kv_dtype must be None or 'float8_e4m3fn'; got '" + *kv_dtype + "'");
    if (!(k_fp8 || k_u8) || !(v_fp8 || v_u8)) {
      bad("kv_dtype='float8_e4m3fn' needs k and v of dtype float8_e4m3fn or uint8 (their e4m3 bytes)");
    }
    return flash::KvDType::kFloat8E4M3;
  }
  if (k_fp8 && v_fp8) return flash::KvDType::kFloat8E4M3;
  if (k_fp8 || v_fp8) bad("k and v must both be float8_e4m3fn (an fp8 cache) or both have q's dtype");
  if (q_e4m3) {
    bad("an e4m3 q (the FP8 prefill) needs k and v in e4m3 too: float8_e4m3fn, or uint8 with "
        "kv_dtype='float8_e4m3fn'");
  }
  if (k_u8 || v_u8) {
    bad("k and v are uint8: if they hold e4m3 bytes, pass kv_dtype='float8_e4m3fn' (an fp8 cache); otherwise "
        "they must be float16 or bfloat16");
  }
  const char* what = " must be float16 or bfloat16 (or float8_e4m3fn: an fp8 cache)";
  if (!is_dtype(k, nb::dlpack::dtype_code::Float, 16) && !is_dtype(k, nb::dlpack::dtype_code::Bfloat, 16)) {
    bad(std::string("k") + what);
  }
  if (!is_dtype(v, nb::dlpack::dtype_code::Float, 16) && !is_dtype(v, nb::dlpack::dtype_code::Bfloat, 16)) {
    bad(std::string("v") + what);
  }
  if (element_type(k, "k") != dtype || element_type(v, "v") != dtype) bad("q, k and v must have the same dtype");
  return flash::KvDType::kSame;
}

// The CUDA device of the call's first tensor (q, or o_states), which every
// other tensor must share; -1 outside a call's checks.
thread_local int32_t t_call_device = -1;

void expect_cuda(const AnyArray& a, const char* name) {
  if (a.device_type() != nb::device::cuda::value) {
    bad(std::string(name) + " must be a CUDA tensor (DLPack device type kDLCUDA); got device type " +
        std::to_string(a.device_type()));
  }
  if (t_call_device >= 0 && a.device_id() != t_call_device) {
    bad(std::string(name) + " is on CUDA device " + std::to_string(a.device_id()) +
        "; every tensor of a call must be on the first one's, device " + std::to_string(t_call_device));
  }
}

// While alive: `first` is a CUDA tensor on the current device, and the
// tensors checked after it must be on the same one. The library runs on the
// current device (flash.attention makes q's current for PyTorch and CuPy).
class CallDevice {
 public:
  CallDevice(const AnyArray& first, const char* name) {
    expect_cuda(first, name);
    int current = -1;
    if (cudaGetDevice(&current) == cudaSuccess && current != first.device_id()) {
      bad(std::string(name) + " is on CUDA device " + std::to_string(first.device_id()) + " but device " +
          std::to_string(current) + " is current; make " + name + "'s device current first");
    }
    t_call_device = first.device_id();
  }
  ~CallDevice() { t_call_device = -1; }
  CallDevice(const CallDevice&) = delete;
  CallDevice& operator=(const CallDevice&) = delete;
};

void expect_ndim(const AnyArray& a, size_t ndim, const char* name, const char* layout) {
  if (a.ndim() != ndim) {
    bad(std::string(name) + " must have " + std::to_string(ndim) + " dimensions (" + layout + "); it has " +
        std::to_string(a.ndim()));
  }
}

// Dimension `dim`'s stride in elements. A size-1 dimension's stride is never
// used, and producers set it to anything (PyTorch before 2.10 exported 1):
// it is given the densely packed value, which the library's checks accept.
int64_t stride(const AnyArray& a, size_t dim) {
  if (a.shape(dim) > 1) return static_cast<int64_t>(a.stride(dim));
  int64_t dense = 1;
  for (size_t d = dim + 1; d < a.ndim(); ++d) dense *= static_cast<int64_t>(a.shape(d));
  return dense;
}

void expect_int32_vector(const AnyArray& a, const char* name) {
  expect_cuda(a, name);
  if (!is_dtype(a, nb::dlpack::dtype_code::Int, 32)) bad(std::string(name) + " must be int32");
  if (a.ndim() != 1 || stride(a, 0) != 1) bad(std::string(name) + " must be a contiguous 1-D tensor");
}

// A descale of an fp8 cache: a contiguous float32 [1] or [heads_kv] CUDA
// tensor. Returns its length.
int64_t check_descale(const AnyArray& d, int64_t heads_kv, const char* name) {
  expect_cuda(d, name);
  if (!is_dtype(d, nb::dlpack::dtype_code::Float, 32) || d.ndim() != 1 ||
      (static_cast<int64_t>(d.shape(0)) != 1 && static_cast<int64_t>(d.shape(0)) != heads_kv) || stride(d, 0) != 1) {
    bad(std::string(name) + " must be a contiguous float32 tensor of 1 (one factor for all K/V heads) or heads_kv (" +
        std::to_string(heads_kv) + ") elements");
  }
  return static_cast<int64_t>(d.shape(0));
}


// Everything attention(), workspace_size() and kernel_choice() share: the
// params of the call, from the tensors and options.
flash::AttentionParams make_params(AnyArray q, AnyArray k, AnyArray v, std::optional<AnyArray> out,
                                   std::optional<AnyArray> lse, bool causal, std::optional<double> scale,
                                   int64_t window_left, int64_t window_right, double softcap,
                                   std::optional<AnyArray> sinks, std::optional<AnyArray> alibi_slopes,
                                   std::optional<AnyArray> cu_seqlens_q, std::optional<AnyArray> cu_seqlens_k,
                                   int64_t max_seqlen_q, int64_t max_seqlen_k, std::optional<AnyArray> seqused_k,
                                   std::optional<AnyArray> block_table, int64_t batch, int32_t num_splits,
                                   std::optional<AnyArray> workspace, const std::string& backend, bool autotune,
                                   std::optional<AnyArray> k_new, std::optional<AnyArray> v_new,
                                   std::optional<AnyArray> cu_seqlens_k_new, std::optional<AnyArray> rotary_cos,
                                   std::optional<AnyArray> rotary_sin, bool rotary_interleaved,
                                   const std::optional<std::string>& kv_dtype, std::optional<AnyArray> k_descale,
                                   std::optional<AnyArray> v_descale, const std::optional<std::string>& q_dtype,
                                   std::optional<AnyArray> q_descale, const std::optional<std::string>& out_dtype) {
  flash::AttentionParams p;
  const bool varlen_q = cu_seqlens_q.has_value();
  const bool varlen_k = cu_seqlens_k.has_value();
  const bool paged = block_table.has_value();
  expect_ndim(q, varlen_q ? 3 : 4, "q", varlen_q ? "total_q, heads_q, head_dim" : "batch, seqlen_q, heads_q, head_dim");
  const char* kv_layout = paged      ? "num_pages, page_size, heads_kv, head_dim"
                          : varlen_k ? "total_k, heads_kv, head_dim"
                                     : "batch, seqlen_k, heads_kv, head_dim";
  expect_ndim(k, varlen_k ? 3 : 4, "k", kv_layout);
  expect_ndim(v, varlen_k ? 3 : 4, "v", kv_layout);
  const bool q_e4m3 = q_is_e4m3(q, q_dtype);
  if (q_e4m3) {
    p.q_dtype = flash::KvDType::kFloat8E4M3;
    p.dtype = fp8_out_type(out, out_dtype);
  } else {
    if (out_dtype.has_value()) bad("out_dtype is for an e4m3 q (the FP8 prefill); otherwise out has q's dtype");
    if (q_descale.has_value()) {
      bad("q_descale needs an e4m3 q (the FP8 prefill): q of dtype float8_e4m3fn, or uint8 with "
          "q_dtype='float8_e4m3fn'");
    }
    p.dtype = element_type(q, "q");
  }
  p.kv_dtype = kv_element_type(k, v, p.dtype, kv_dtype, q_e4m3);
  if ((k_descale.has_value() || v_descale.has_value()) && p.kv_dtype != flash::KvDType::kFloat8E4M3) {
    bad("k_descale / v_descale need an fp8 cache: k and v of dtype float8_e4m3fn, or uint8 with "
        "kv_dtype='float8_e4m3fn'; these k and v have q's dtype");
  }
  const CallDevice device(q, "q");
  expect_cuda(k, "k");
  expect_cuda(v, "v");
  const size_t qd = q.ndim() - 1, kd = k.ndim() - 1;
  p.head_dim = static_cast<int64_t>(q.shape(qd));
  p.heads_q = static_cast<int64_t>(q.shape(qd - 1));
  p.heads_kv = static_cast<int64_t>(k.shape(kd - 1));
  if (static_cast<int64_t>(k.shape(kd)) != p.head_dim) bad("k must have q's head_dim");
  for (size_t i = 0; i < kd; ++i) {
    if (k.shape(i) != v.shape(i)) bad("k and v must have the same shape but for v's last dimension (head_dim_v)");
  }
  // V's width: head_dim_v when it differs from head_dim (0 means head_dim).
  const int64_t head_dim_v = static_cast<int64_t>(v.shape(kd));
  p.head_dim_v = head_dim_v != p.head_dim ? head_dim_v : 0;
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.q_dim_stride = stride(q, qd);
  p.k_dim_stride = stride(k, kd);
  p.v_dim_stride = stride(v, kd);
  p.q_head_stride = stride(q, qd - 1);
  p.k_head_stride = stride(k, kd - 1);
  p.v_head_stride = stride(v, kd - 1);
  p.q_seq_stride = stride(q, qd - 2);
  p.k_seq_stride = stride(k, kd - 2);
  p.v_seq_stride = stride(v, kd - 2);

  if (varlen_q) {
    expect_int32_vector(*cu_seqlens_q, "cu_seqlens_q");
    p.cu_seqlens_q = static_cast<const int32_t*>(cu_seqlens_q->data());
    p.batch = static_cast<int64_t>(cu_seqlens_q->shape(0)) - 1;
    p.total_q = static_cast<int64_t>(q.shape(0));
    if (max_seqlen_q <= 0) bad("max_seqlen_q is required with cu_seqlens_q (the longest query sequence)");
    p.seqlen_q = max_seqlen_q;
  } else {
    p.batch = static_cast<int64_t>(q.shape(0));
    p.seqlen_q = static_cast<int64_t>(q.shape(1));
    p.q_batch_stride = stride(q, 0);
  }
  if (batch >= 0 && batch != p.batch) bad("batch does not match q / cu_seqlens_q");

  if (paged && varlen_k) {
    bad("block_table and cu_seqlens_k do not go together: a paged cache takes its lengths from seqused_k");
  }
  if (paged) {
    const AnyArray& t = *block_table;
    expect_cuda(t, "block_table");
    if (!is_dtype(t, nb::dlpack::dtype_code::Int, 32) || t.ndim() != 2 || stride(t, 1) != 1) {
      bad("block_table must be int32 [batch, max_pages_per_seq] with contiguous rows");
    }
    if (static_cast<int64_t>(t.shape(0)) != p.batch) bad("block_table must have one row per sequence");
    p.block_table = static_cast<const int32_t*>(t.data());
    p.block_table_batch_stride = stride(t, 0);
    p.max_pages_per_seq = static_cast<int64_t>(t.shape(1));
    p.num_pages = static_cast<int64_t>(k.shape(0));
    p.page_size = static_cast<int64_t>(k.shape(1));
    p.k_batch_stride = stride(k, 0);
    p.v_batch_stride = stride(v, 0);
    p.seqlen_k = max_seqlen_k > 0 ? max_seqlen_k : p.max_pages_per_seq * p.page_size;
  } else if (varlen_k) {
    expect_int32_vector(*cu_seqlens_k, "cu_seqlens_k");
    if (static_cast<int64_t>(cu_seqlens_k->shape(0)) != p.batch + 1) bad("cu_seqlens_k must have batch + 1 entries");
    p.cu_seqlens_k = static_cast<const int32_t*>(cu_seqlens_k->data());
    p.total_k = static_cast<int64_t>(k.shape(0));
    if (max_seqlen_k <= 0) bad("max_seqlen_k is required with cu_seqlens_k (the longest key sequence)");
    p.seqlen_k = max_seqlen_k;
  } else {
    if (static_cast<int64_t>(k.shape(0)) != p.batch) bad("k and v must have q's batch size");
    p.seqlen_k = static_cast<int64_t>(k.shape(1));
    p.k_batch_stride = stride(k, 0);
    p.v_batch_stride = stride(v, 0);
  }
  // V a view of K's rows at K's address (MLA's absorbed form, v = k[...,
  // :512]) has K's strides; stride() gives a size-1 dimension the packed
  // value of each tensor's own width, so those come from K.
  if (p.v == p.k) {
    if (k.shape(kd - 1) == 1) p.v_head_stride = p.k_head_stride;
    if (k.shape(kd - 2) == 1) p.v_seq_stride = p.k_seq_stride;
    if (kd == 3 && k.shape(0) == 1) p.v_batch_stride = p.k_batch_stride;
  }
  if (seqused_k.has_value()) {
    expect_int32_vector(*seqused_k, "seqused_k");
    if (static_cast<int64_t>(seqused_k->shape(0)) != p.batch) bad("seqused_k must have batch entries");
    p.seqused_k = static_cast<const int32_t*>(seqused_k->data());
  }

  if (out.has_value()) {
    const AnyArray& o = *out;
    expect_cuda(o, "out");
    if (o.ndim() != q.ndim()) bad("out must have q's shape, with v's last dimension");
    for (size_t i = 0; i < qd; ++i) {
      if (o.shape(i) != q.shape(i)) bad("out must have q's shape, with v's last dimension");
    }
    if (static_cast<int64_t>(o.shape(qd)) != head_dim_v) bad("out must have q's shape, with v's last dimension");
    if (element_type(o, "out") != p.dtype) bad("out must have q's dtype");
    p.o = o.data();
    p.o_dim_stride = stride(o, qd);
    p.o_head_stride = stride(o, qd - 1);
    p.o_seq_stride = stride(o, qd - 2);
    p.o_batch_stride = varlen_q ? 0 : stride(o, 0);
  }
  if (!out.has_value()) {
    // Planning calls (workspace_size, kernel_choice, validate) without an
    // output: a stand-in O, densely packed like q but head_dim_v wide, at an
    // address no device allocation has (never written: only forward writes,
    // and it needs out).
    p.o = kStandInO;
    p.o_dim_stride = 1;
    p.o_head_stride = head_dim_v;
    p.o_seq_stride = p.heads_q * head_dim_v;
    p.o_batch_stride = varlen_q ? 0 : p.seqlen_q * p.o_seq_stride;
  }
  if (lse.has_value()) {
    const AnyArray& l = *lse;
    expect_cuda(l, "lse");
    if (!is_dtype(l, nb::dlpack::dtype_code::Float, 32)) bad("lse must be float32");
    const bool shape_ok = varlen_q ? (l.ndim() == 2 && static_cast<int64_t>(l.shape(0)) == p.heads_q &&
                                      static_cast<int64_t>(l.shape(1)) == p.total_q && stride(l, 1) == 1 &&
                                      stride(l, 0) == p.total_q)
                                   : (l.ndim() == 3 && static_cast<int64_t>(l.shape(0)) == p.batch &&
                                      static_cast<int64_t>(l.shape(1)) == p.heads_q &&
                                      static_cast<int64_t>(l.shape(2)) == p.seqlen_q);
    // (stride() gives size-1 dimensions their dense value, so only real
    // strides are compared.)
    if (!shape_ok) {
      bad(varlen_q ? "lse must be a contiguous float32 [heads_q, total_q]"
                   : "lse must be a contiguous float32 [batch, heads_q, seqlen_q]");
    }
    if (!varlen_q && !(stride(l, 2) == 1 && stride(l, 1) == p.seqlen_q && stride(l, 0) == p.heads_q * p.seqlen_q)) {
      bad("lse must be a contiguous float32 [batch, heads_q, seqlen_q]");
    }
    p.lse = static_cast<float*>(l.data());
  }

  p.causal = causal;
  if (scale.has_value()) {
    if (!(*scale > 0.0)) bad("scale must be positive (None: 1 / sqrt(head_dim))");
    p.softmax_scale = static_cast<float>(*scale);
    // 0 means the default to the library: a positive scale float32 rounds to 0 must not become it.
    if (p.softmax_scale == 0.f) bad("scale rounds to 0 in float32; it must be at least about 1.4e-45");
  }
  p.window_left = window_left;
  p.window_right = window_right;
  p.softcap = static_cast<float>(softcap);
  if (sinks.has_value()) {
    const AnyArray& s = *sinks;
    expect_cuda(s, "sinks");
    if (!is_dtype(s, nb::dlpack::dtype_code::Float, 32) || s.ndim() != 1 ||
        static_cast<int64_t>(s.shape(0)) != p.heads_q || stride(s, 0) != 1) {
      bad("sinks must be a contiguous float32 [heads_q] tensor");
    }
    p.sinks = static_cast<const float*>(s.data());
  }
  if (alibi_slopes.has_value()) {
    const AnyArray& s = *alibi_slopes;
    expect_cuda(s, "alibi_slopes");
    if (!is_dtype(s, nb::dlpack::dtype_code::Float, 32) || s.ndim() != 1 ||
        static_cast<int64_t>(s.shape(0)) != p.heads_q || stride(s, 0) != 1) {
      bad("alibi_slopes must be a contiguous float32 [heads_q] tensor");
    }
    p.alibi_slopes = static_cast<const float*>(s.data());
  }
  if (k_descale.has_value() || v_descale.has_value() || q_descale.has_value()) {
    // One factor for every K/V head (1 element: descale_head_stride 0) or
    // one per K/V head (heads_kv elements: stride 1); a descale not given
    // is 1. q_descale is indexed by the K/V head too.
    const int64_t nk = k_descale.has_value() ? check_descale(*k_descale, p.heads_kv, "k_descale") : 0;
    const int64_t nv = v_descale.has_value() ? check_descale(*v_descale, p.heads_kv, "v_descale") : 0;
    const int64_t nq = q_descale.has_value() ? check_descale(*q_descale, p.heads_kv, "q_descale") : 0;
    int64_t n = 0;
    for (int64_t len : {nq, nk, nv}) {
      if (len != 0 && n != 0 && len != n) {
        bad("q_descale, k_descale and v_descale must have the same length (1 or heads_kv)");
      }
      if (len != 0) n = len;
    }
    if (k_descale.has_value()) p.k_descale = static_cast<const float*>(k_descale->data());
    if (v_descale.has_value()) p.v_descale = static_cast<const float*>(v_descale->data());
    if (q_descale.has_value()) p.q_descale = static_cast<const float*>(q_descale->data());
    p.descale_head_stride = n > 1 ? 1 : 0;
  }
  if (k_new.has_value() != v_new.has_value()) bad("k_new and v_new go together");
  if (k_new.has_value()) {
    // New K/V rows to append: [batch, seqlen_new, heads_kv, head_dim / head_dim_v], or packed
    // [total_new, heads_kv, ...] with cu_seqlens_k_new.
    const AnyArray& kn = *k_new;
    const AnyArray& vn = *v_new;
    const bool varlen_new = cu_seqlens_k_new.has_value();
    const char* layout = varlen_new ? "total_new, heads_kv, head_dim" : "batch, seqlen_new, heads_kv, head_dim";
    expect_ndim(kn, varlen_new ? 3 : 4, "k_new", layout);
    expect_ndim(vn, varlen_new ? 3 : 4, "v_new", layout);
    expect_cuda(kn, "k_new");
    expect_cuda(vn, "v_new");
    if (element_type(kn, "k_new") != p.dtype || element_type(vn, "v_new") != p.dtype) {
      bad("k_new and v_new must have q's dtype");
    }
    const size_t nd = kn.ndim() - 1;
    if (static_cast<int64_t>(kn.shape(nd)) != p.head_dim || vn.shape(nd) != v.shape(v.ndim() - 1) ||
        static_cast<int64_t>(kn.shape(nd - 1)) != p.heads_kv) {
      bad("k_new and v_new must have k's and v's heads and last dimensions");
    }
    for (size_t i = 0; i < nd; ++i) {
      if (kn.shape(i) != vn.shape(i)) bad("k_new and v_new must have the same shape but for the last dimension");
    }
    if (!varlen_new && static_cast<int64_t>(kn.shape(0)) != p.batch) bad("k_new must have q's batch size");
    p.k_new = kn.data();
    p.v_new = vn.data();
    p.k_new_head_stride = stride(kn, nd - 1);
    p.v_new_head_stride = stride(vn, nd - 1);
    p.k_new_seq_stride = stride(kn, nd - 2);
    p.v_new_seq_stride = stride(vn, nd - 2);
    if (stride(kn, nd) != 1 || stride(vn, nd) != 1) bad("k_new and v_new must have a contiguous last dimension");
    if (varlen_new) {
      expect_int32_vector(*cu_seqlens_k_new, "cu_seqlens_k_new");
      if (static_cast<int64_t>(cu_seqlens_k_new->shape(0)) != p.batch + 1) {
        bad("cu_seqlens_k_new must have batch + 1 entries");
      }
      p.cu_seqlens_k_new = static_cast<const int32_t*>(cu_seqlens_k_new->data());
      p.seqlen_new = static_cast<int64_t>(kn.shape(0));  // at least the longest sequence's
    } else {
      p.k_new_batch_stride = stride(kn, 0);
      p.v_new_batch_stride = stride(vn, 0);
      p.seqlen_new = static_cast<int64_t>(kn.shape(1));
    }
  } else if (cu_seqlens_k_new.has_value()) {
    bad("cu_seqlens_k_new needs k_new and v_new");
  }
  if (rotary_cos.has_value() != rotary_sin.has_value()) bad("rotary_cos and rotary_sin go together");
  if (rotary_cos.has_value()) {
    for (const AnyArray* t : {&*rotary_cos, &*rotary_sin}) {
      expect_cuda(*t, "rotary_cos / rotary_sin");
      if (!is_dtype(*t, nb::dlpack::dtype_code::Float, 32) || t->ndim() != 2 || stride(*t, 1) != 1 ||
          stride(*t, 0) != static_cast<int64_t>(t->shape(1))) {
        bad("rotary_cos and rotary_sin must be contiguous float32 [positions, rotary_dim / 2] tensors");
      }
    }
    if (rotary_cos->shape(0) != rotary_sin->shape(0) || rotary_cos->shape(1) != rotary_sin->shape(1)) {
      bad("rotary_cos and rotary_sin must have the same shape");
    }
    p.rotary_cos = static_cast<const float*>(rotary_cos->data());
    p.rotary_sin = static_cast<const float*>(rotary_sin->data());
    p.rotary_positions = static_cast<int64_t>(rotary_cos->shape(0));
    p.rotary_dim = 2 * static_cast<int64_t>(rotary_cos->shape(1));
    p.rotary_interleaved = rotary_interleaved;
  }
  p.num_splits = num_splits;
  if (workspace.has_value()) {
    expect_cuda(*workspace, "workspace");
    p.workspace = workspace->data();
    p.workspace_bytes = workspace->nbytes();
  }
  if (backend == "auto") p.backend = flash::Backend::kAuto;
  else if (backend == "sm80") p.backend = flash::Backend::kSm80;
  else if (backend == "sm90") p.backend = flash::Backend::kSm90;
  else if (backend == "decode") p.backend = flash::Backend::kDecode;
  else bad("backend must be 'auto', 'sm80', 'sm90' or 'decode'");
  p.autotune = autotune;
  return p;
}

const char* backend_name(flash::Backend b) {
  switch (b) {
    case flash::Backend::kSm80: return "sm80";
    case flash::Backend::kSm90: return "sm90";
    case flash::Backend::kDecode: return "decode";
    default: return "auto";
  }
}

// The keyword arguments every entry point takes, in order.
#define FLASH_ARGS                                                                                              \
  nb::arg("q"), nb::arg("k"), nb::arg("v"), nb::kw_only(), nb::arg("out").none() = nb::none(),                   \
      nb::arg("lse").none() = nb::none(), nb::arg("causal") = false, nb::arg("scale").none() = nb::none(),     \
      nb::arg("window_left") = -1, nb::arg("window_right") = -1, nb::arg("softcap") = 0.0,                     \
      nb::arg("sinks").none() = nb::none(), nb::arg("alibi_slopes").none() = nb::none(),                       \
      nb::arg("cu_seqlens_q").none() = nb::none(), nb::arg("cu_seqlens_k").none() = nb::none(),                \
      nb::arg("max_seqlen_q") = 0, nb::arg("max_seqlen_k") = 0, nb::arg("seqused_k").none() = nb::none(),      \
      nb::arg("block_table").none() = nb::none(), nb::arg("batch") = -1, nb::arg("num_splits") = 0,            \
      nb::arg("workspace").none() = nb::none(), nb::arg("backend") = "auto", nb::arg("autotune") = false,       \
      nb::arg("k_new").none() = nb::none(), nb::arg("v_new").none() = nb::none(),                               \
      nb::arg("cu_seqlens_k_new").none() = nb::none(), nb::arg("rotary_cos").none() = nb::none(),              \
      nb::arg("rotary_sin").none() = nb::none(), nb::arg("rotary_interleaved") = false,                        \
      nb::arg("kv_dtype").none() = nb::none(), nb::arg("k_descale").none() = nb::none(),                       \
      nb::arg("v_descale").none() = nb::none(), nb::arg("q_dtype").none() = nb::none(),                         \
      nb::arg("q_descale").none() = nb::none(), nb::arg("out_dtype").none() = nb::none()

}  // namespace

// flash::MergeParams from DLPack tensors: o_states [n, batch, seqlen_q,
// heads, head_dim] (any strides, head_dim contiguous), lse_states float32
// [n, batch, heads, seqlen_q] with each state's [batch, heads, seqlen_q]
// contiguous, out [batch, seqlen_q, heads, head_dim], lse float32 [batch,
// heads, seqlen_q] contiguous or None.
flash::MergeParams make_merge_params(AnyArray o_states, AnyArray lse_states, AnyArray out, std::optional<AnyArray> lse) {
  const CallDevice device(o_states, "o_states");
  expect_cuda(lse_states, "lse_states");
  expect_cuda(out, "out");
  expect_ndim(o_states, 5, "o_states", "num_states, batch, seqlen_q, heads, head_dim");
  expect_ndim(lse_states, 4, "lse_states", "num_states, batch, heads, seqlen_q");
  expect_ndim(out, 4, "out", "batch, seqlen_q, heads, head_dim");
  flash::MergeParams p;
  p.dtype = element_type(o_states, "o_states");
  if (element_type(out, "out") != p.dtype) bad("out must have o_states' dtype");
  if (!is_dtype(lse_states, nb::dlpack::dtype_code::Float, 32)) bad("lse_states must be float32");
  p.num_states = static_cast<int64_t>(o_states.shape(0));
  p.batch = static_cast<int64_t>(o_states.shape(1));
  p.seqlen_q = static_cast<int64_t>(o_states.shape(2));
  p.heads = static_cast<int64_t>(o_states.shape(3));
  p.head_dim = static_cast<int64_t>(o_states.shape(4));
  const int64_t want_lse[4] = {p.num_states, p.batch, p.heads, p.seqlen_q};
  const int64_t want_out[4] = {p.batch, p.seqlen_q, p.heads, p.head_dim};
  for (size_t d = 0; d < 4; ++d) {
    if (static_cast<int64_t>(lse_states.shape(d)) != want_lse[d]) {
      bad("lse_states must be [num_states, batch, heads, seqlen_q] of o_states' sizes");
    }
    if (static_cast<int64_t>(out.shape(d)) != want_out[d]) bad("out must be [batch, seqlen_q, heads, head_dim] of o_states' sizes");
  }
  if (stride(o_states, 4) != 1 || stride(out, 3) != 1) bad("o_states' and out's last dimension must be contiguous");
  // Each state's LSE is [batch, heads, seqlen_q] contiguous (the library's LSE layout).
  if (stride(lse_states, 3) != 1 || stride(lse_states, 2) != p.seqlen_q ||
      stride(lse_states, 1) != p.heads * p.seqlen_q) {
    bad("each state of lse_states must be a contiguous [batch, heads, seqlen_q] (flash's LSE layout)");
  }
  p.o_states = o_states.data();
  p.o_state_stride = stride(o_states, 0);
  p.o_states_batch_stride = stride(o_states, 1);
  p.o_states_seq_stride = stride(o_states, 2);
  p.o_states_head_stride = stride(o_states, 3);
  p.lse_states = static_cast<const float*>(lse_states.data());
  p.lse_state_stride = stride(lse_states, 0);
  p.o = out.data();
  p.o_batch_stride = stride(out, 0);
  p.o_seq_stride = stride(out, 1);
  p.o_head_stride = stride(out, 2);
  if (lse) {
    expect_cuda(*lse, "lse");
    expect_ndim(*lse, 3, "lse", "batch, heads, seqlen_q");
    if (!is_dtype(*lse, nb::dlpack::dtype_code::Float, 32)) bad("lse must be float32");
    for (size_t d = 0; d < 3; ++d) {
      if (static_cast<int64_t>(lse->shape(d)) != want_lse[d + 1]) bad("lse must be [batch, heads, seqlen_q]");
    }
    if (stride(*lse, 2) != 1 || stride(*lse, 1) != p.seqlen_q || stride(*lse, 0) != p.heads * p.seqlen_q) {
      bad("lse must be a contiguous [batch, heads, seqlen_q]");
    }
    p.lse = static_cast<float*>(lse->data());
  }
  return p;
}

NB_MODULE(_flash, m) {
  m.doc() = "flash's extension module; use the flash package (flash.attention) instead.";
  m.attr("__version__") = FLASH_VERSION_STRING;
  m.def(
      "library_version", []() { return std::string(flash::version()); }, "The linked library's version string.");

  // The call's parameters, built once from the tensors and options; the
  // entry points below take them. They hold the tensors' addresses, not
  // the tensors: build them right before the call (flash/__init__.py does).
  nb::class_<flash::AttentionParams>(m, "Params");
  m.def(
      "params",
      [](AnyArray q, AnyArray k, AnyArray v, std::optional<AnyArray> out, std::optional<AnyArray> lse, bool causal,
         std::optional<double> scale, int64_t window_left, int64_t window_right, double softcap,
         std::optional<AnyArray> sinks, std::optional<AnyArray> alibi_slopes, std::optional<AnyArray> cu_seqlens_q,
         std::optional<AnyArray> cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
         std::optional<AnyArray> seqused_k, std::optional<AnyArray> block_table, int64_t batch, int32_t num_splits,
         std::optional<AnyArray> workspace, const std::string& backend, bool autotune, std::optional<AnyArray> k_new,
         std::optional<AnyArray> v_new, std::optional<AnyArray> cu_seqlens_k_new, std::optional<AnyArray> rotary_cos,
         std::optional<AnyArray> rotary_sin, bool rotary_interleaved, std::optional<std::string> kv_dtype,
         std::optional<AnyArray> k_descale, std::optional<AnyArray> v_descale, std::optional<std::string> q_dtype,
         std::optional<AnyArray> q_descale, std::optional<std::string> out_dtype) {
        return make_params(q, k, v, out, lse, causal, scale, window_left, window_right, softcap, sinks, alibi_slopes,
                           cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_k, block_table, batch,
                           num_splits, workspace, backend, autotune, k_new, v_new, cu_seqlens_k_new, rotary_cos,
                           rotary_sin, rotary_interleaved, kv_dtype, k_descale, v_descale, q_dtype, q_descale,
                           out_dtype);
      },
      FLASH_ARGS, "The call's parameters from DLPack tensors (shapes, strides, dtypes checked here).");

  m.def(
      "forward",
      [](const flash::AttentionParams& p, uintptr_t stream) {
        if (p.o == kStandInO) bad("out is required here (flash.attention allocates it)");
        flash::Status s;
        {
          nb::gil_scoped_release release;
          s = flash::attention_forward(p, reinterpret_cast<cudaStream_t>(stream));
        }
        raise_if_failed(s);
      },
      nb::arg("params"), nb::arg("stream") = 0,
      "Computes attention into `out` (and `lse`) on `stream` (a cudaStream_t as an int; 0: the legacy default "
      "stream). Allocates nothing.");

  m.def(
      "merge_states",
      [](AnyArray o_states, AnyArray lse_states, AnyArray out, std::optional<AnyArray> lse, uintptr_t stream) {
        const flash::MergeParams p = make_merge_params(o_states, lse_states, out, lse);
        flash::Status s;
        {
          nb::gil_scoped_release release;
          s = flash::merge_states(p, reinterpret_cast<cudaStream_t>(stream));
        }
        raise_if_failed(s);
      },
      nb::arg("o_states"), nb::arg("lse_states"), nb::arg("out"), nb::arg("lse").none() = nb::none(),
      nb::arg("stream") = 0,
      "Merges partial results over disjoint key sets into `out` (and `lse`) on `stream`. Allocates nothing.");

  m.def(
      "validate", [](const flash::AttentionParams& p) { raise_if_failed(flash::validate(p)); }, nb::arg("params"),
      "Runs the library's argument checks without the GPU; raises ValueError with its message.");

  m.def(
      "workspace_size",
      [](const flash::AttentionParams& p) {
        size_t bytes = 0;
        raise_if_failed(flash::attention_workspace_size(p, &bytes));
        return bytes;
      },
      nb::arg("params"), "Bytes of workspace the call needs (0: flash would not split the keys, and it neither appends nor runs the FP8 prefill).");

  m.def(
      "kernel_choice",
      [](const flash::AttentionParams& p) {
        flash::KernelChoice c;
        raise_if_failed(flash::query_kernel_choice(p, &c));
        nb::dict d;
        d["name"] = std::string(c.name);
        d["backend"] = backend_name(c.backend);
        d["block_m"] = c.block_m;
        d["block_n"] = c.block_n;
        d["warps"] = c.warps;
        d["stages"] = c.stages;
        return d;
      },
      nb::arg("params"), "The kernel configuration the call runs (name, backend, block_m, block_n, warps, stages).");
}
