// The C API of flash/flash.h: each call converts its arguments to the C++
// AttentionParams and calls the C++ API, so both run the same checks. The
// message of the last call lives in a thread-local buffer.
#include <cstring>
#include <type_traits>

#include "flash/flash.h"
#include "flash/flash.hpp"
#include "status.h"

namespace {

using flash::AttentionParams;
using flash::Backend;
using flash::DType;
using flash::Status;
using flash::StatusCode;

static_assert(static_cast<int>(FLASH_DTYPE_FLOAT16) == static_cast<int>(DType::kFloat16) &&
                  static_cast<int>(FLASH_DTYPE_BFLOAT16) == static_cast<int>(DType::kBFloat16),
              "flash_dtype must match flash::DType");
static_assert(static_cast<int>(FLASH_BACKEND_AUTO) == static_cast<int>(Backend::kAuto) &&
                  static_cast<int>(FLASH_BACKEND_SM80) == static_cast<int>(Backend::kSm80) &&
                  static_cast<int>(FLASH_BACKEND_SM90) == static_cast<int>(Backend::kSm90) &&
                  static_cast<int>(FLASH_BACKEND_DECODE) == static_cast<int>(Backend::kDecode),
              "flash_backend must match flash::Backend");
static_assert(static_cast<int>(FLASH_SUCCESS) == static_cast<int>(StatusCode::kSuccess) &&
                  static_cast<int>(FLASH_INVALID_ARGUMENT) == static_cast<int>(StatusCode::kInvalidArgument) &&
                  static_cast<int>(FLASH_UNSUPPORTED) == static_cast<int>(StatusCode::kUnsupported) &&
                  static_cast<int>(FLASH_CUDA_ERROR) == static_cast<int>(StatusCode::kCudaError),
              "flash_status_code must match flash::StatusCode");
static_assert(std::is_standard_layout<flash_attention_params>::value, "flash_attention_params must be plain C");
// The inference-engine fields carry the C++ types unchanged, so to_cpp and
// to_c copy them without conversion.
#define FLASH_SAME_FIELD_TYPE(field)                                                                            \
  static_assert(std::is_same<decltype(flash_attention_params::field), decltype(AttentionParams::field)>::value, \
                "flash_attention_params::" #field " must have the type of AttentionParams::" #field)
FLASH_SAME_FIELD_TYPE(cu_seqlens_q);
FLASH_SAME_FIELD_TYPE(cu_seqlens_k);
FLASH_SAME_FIELD_TYPE(seqused_k);
FLASH_SAME_FIELD_TYPE(block_table);
FLASH_SAME_FIELD_TYPE(block_table_batch_stride);
FLASH_SAME_FIELD_TYPE(max_pages_per_seq);
FLASH_SAME_FIELD_TYPE(page_size);
FLASH_SAME_FIELD_TYPE(num_pages);
FLASH_SAME_FIELD_TYPE(window_left);
FLASH_SAME_FIELD_TYPE(window_right);
FLASH_SAME_FIELD_TYPE(softcap);
FLASH_SAME_FIELD_TYPE(num_splits);
FLASH_SAME_FIELD_TYPE(workspace);
FLASH_SAME_FIELD_TYPE(workspace_bytes);
FLASH_SAME_FIELD_TYPE(total_q);
FLASH_SAME_FIELD_TYPE(total_k);
#undef FLASH_SAME_FIELD_TYPE

// This thread's last message; what flash_last_error_message() returns.
thread_local char last_message[sizeof(Status::message)] = {};

// The bytes of an enum or bool field as an integer of the same size. A
// struct filled by a C caller may hold any value there, and loading one out
// of range as the enum or bool type is undefined behaviour, so these fields
// are only ever read this way.
static_assert(sizeof(flash_dtype) == sizeof(int32_t) && sizeof(flash_backend) == sizeof(int32_t),
              "the C enums must be 32-bit");
static_assert(sizeof(bool) == sizeof(unsigned char), "bool must be one byte");
template <typename Int, typename Field>
Int raw_value(const Field& field) noexcept {
  static_assert(sizeof(Int) == sizeof(Field), "raw_value reads the whole field");
  Int value;
  std::memcpy(&value, &field, sizeof(value));
  return value;
}

// Converts `c` to *p, or says which bool field holds neither 0 nor 1. The
// enum fields go through as their integers (DType and Backend are int32_t
// enums, so every value is representable); validate() rejects unknown ones.
Status to_cpp(const flash_attention_params& c, AttentionParams* out) noexcept {
  const auto causal = raw_value<unsigned char>(c.causal);
  if (causal > 1) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "causal holds the byte %d; a bool must be 0 (false) or 1 (true)",
                                      static_cast<int>(causal));
  }
  AttentionParams& p = *out;
  p = AttentionParams{};
  p.q = c.q;
  p.k = c.k;
  p.v = c.v;
  p.o = c.o;
  p.lse = c.lse;
  p.dtype = static_cast<DType>(raw_value<int32_t>(c.dtype));
  p.batch = c.batch;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = c.head_dim;
  p.q_batch_stride = c.q_batch_stride;
  p.q_seq_stride = c.q_seq_stride;
  p.q_head_stride = c.q_head_stride;
  p.k_batch_stride = c.k_batch_stride;
  p.k_seq_stride = c.k_seq_stride;
  p.k_head_stride = c.k_head_stride;
  p.v_batch_stride = c.v_batch_stride;
  p.v_seq_stride = c.v_seq_stride;
  p.v_head_stride = c.v_head_stride;
  p.o_batch_stride = c.o_batch_stride;
  p.o_seq_stride = c.o_seq_stride;
  p.o_head_stride = c.o_head_stride;
  p.q_dim_stride = c.q_dim_stride;
  p.k_dim_stride = c.k_dim_stride;
  p.v_dim_stride = c.v_dim_stride;
  p.o_dim_stride = c.o_dim_stride;
  p.causal = causal != 0;
  p.softmax_scale = c.softmax_scale;
  p.backend = static_cast<Backend>(raw_value<int32_t>(c.backend));
  p.autotune = c.autotune != 0;
  p.cu_seqlens_q = c.cu_seqlens_q;
  p.cu_seqlens_k = c.cu_seqlens_k;
  p.seqused_k = c.seqused_k;
  p.block_table = c.block_table;
  p.block_table_batch_stride = c.block_table_batch_stride;
  p.max_pages_per_seq = c.max_pages_per_seq;
  p.page_size = c.page_size;
  p.num_pages = c.num_pages;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.num_splits = c.num_splits;
  p.workspace = c.workspace;
  p.workspace_bytes = c.workspace_bytes;
  p.total_q = c.total_q;
  p.total_k = c.total_k;
  return Status{};
}

void to_c(const AttentionParams& p, flash_attention_params* c) noexcept {
  c->q = p.q;
  c->k = p.k;
  c->v = p.v;
  c->o = p.o;
  c->lse = p.lse;
  const auto dtype = static_cast<int32_t>(p.dtype);
  std::memcpy(&c->dtype, &dtype, sizeof(dtype));
  c->batch = p.batch;
  c->seqlen_q = p.seqlen_q;
  c->seqlen_k = p.seqlen_k;
  c->heads_q = p.heads_q;
  c->heads_kv = p.heads_kv;
  c->head_dim = p.head_dim;
  c->q_batch_stride = p.q_batch_stride;
  c->q_seq_stride = p.q_seq_stride;
  c->q_head_stride = p.q_head_stride;
  c->k_batch_stride = p.k_batch_stride;
  c->k_seq_stride = p.k_seq_stride;
  c->k_head_stride = p.k_head_stride;
  c->v_batch_stride = p.v_batch_stride;
  c->v_seq_stride = p.v_seq_stride;
  c->v_head_stride = p.v_head_stride;
  c->o_batch_stride = p.o_batch_stride;
  c->o_seq_stride = p.o_seq_stride;
  c->o_head_stride = p.o_head_stride;
  c->q_dim_stride = p.q_dim_stride;
  c->k_dim_stride = p.k_dim_stride;
  c->v_dim_stride = p.v_dim_stride;
  c->o_dim_stride = p.o_dim_stride;
  c->causal = p.causal;
  c->softmax_scale = p.softmax_scale;
  const auto backend = static_cast<int32_t>(p.backend);
  std::memcpy(&c->backend, &backend, sizeof(backend));
  c->autotune = p.autotune ? 1 : 0;
  c->cu_seqlens_q = p.cu_seqlens_q;
  c->cu_seqlens_k = p.cu_seqlens_k;
  c->seqused_k = p.seqused_k;
  c->block_table = p.block_table;
  c->block_table_batch_stride = p.block_table_batch_stride;
  c->max_pages_per_seq = p.max_pages_per_seq;
  c->page_size = p.page_size;
  c->num_pages = p.num_pages;
  c->window_left = p.window_left;
  c->window_right = p.window_right;
  c->softcap = p.softcap;
  c->num_splits = p.num_splits;
  c->workspace = p.workspace;
  c->workspace_bytes = p.workspace_bytes;
  c->total_q = p.total_q;
  c->total_k = p.total_k;
}

// Fills the strides of `c` with the C++ helper `fill`, from the sizes alone:
// every other field, garbage or not, stays as it is.
void set_contiguous(flash_attention_params* c, void (AttentionParams::*fill)() noexcept) noexcept {
  AttentionParams p;
  p.batch = c->batch;
  p.seqlen_q = c->seqlen_q;
  p.seqlen_k = c->seqlen_k;
  p.heads_q = c->heads_q;
  p.heads_kv = c->heads_kv;
  p.head_dim = c->head_dim;
  (p.*fill)();
  c->q_batch_stride = p.q_batch_stride;
  c->q_seq_stride = p.q_seq_stride;
  c->q_head_stride = p.q_head_stride;
  c->k_batch_stride = p.k_batch_stride;
  c->k_seq_stride = p.k_seq_stride;
  c->k_head_stride = p.k_head_stride;
  c->v_batch_stride = p.v_batch_stride;
  c->v_seq_stride = p.v_seq_stride;
  c->v_head_stride = p.v_head_stride;
  c->o_batch_stride = p.o_batch_stride;
  c->o_seq_stride = p.o_seq_stride;
  c->o_head_stride = p.o_head_stride;
  c->q_dim_stride = p.q_dim_stride;
  c->k_dim_stride = p.k_dim_stride;
  c->v_dim_stride = p.v_dim_stride;
  c->o_dim_stride = p.o_dim_stride;
}

// Records `status` as this thread's last message and returns its code.
flash_status_code finish(const Status& status) noexcept {
  static_assert(sizeof(last_message) == sizeof(status.message), "message buffers differ");
  std::memcpy(last_message, status.message, sizeof(last_message));
  last_message[sizeof(last_message) - 1] = '\0';
  return static_cast<flash_status_code>(status.code);
}

flash_status_code null_params() noexcept {
  return finish(flash::detail::make_status(StatusCode::kInvalidArgument,
                                           "params is null; pass a flash_attention_params filled in after "
                                           "flash_attention_params_init"));
}

flash_status_code null_bytes() noexcept {
  return finish(flash::detail::make_status(StatusCode::kInvalidArgument,
                                           "bytes is null; pass the address of a size_t to receive the "
                                           "workspace size"));
}

}  // namespace

extern "C" {

void flash_attention_params_init(flash_attention_params* params) noexcept {
  if (params == nullptr) return;
  to_c(AttentionParams{}, params);
}

void flash_set_contiguous_bnhd(flash_attention_params* params) noexcept {
  if (params == nullptr) return;
  set_contiguous(params, &AttentionParams::set_contiguous_bnhd);
}

void flash_set_contiguous_bhnd(flash_attention_params* params) noexcept {
  if (params == nullptr) return;
  set_contiguous(params, &AttentionParams::set_contiguous_bhnd);
}

flash_status_code flash_validate(const flash_attention_params* params) noexcept {
  if (params == nullptr) return null_params();
  AttentionParams p;
  const Status converted = to_cpp(*params, &p);
  return finish(converted.ok() ? flash::validate(p) : converted);
}

flash_status_code flash_attention_forward(const flash_attention_params* params, void* stream) noexcept {
  if (params == nullptr) return null_params();
  AttentionParams p;
  const Status converted = to_cpp(*params, &p);
  return finish(converted.ok() ? flash::attention_forward(p, static_cast<CUstream_st*>(stream)) : converted);
}

flash_status_code flash_attention_workspace_size(const flash_attention_params* params, size_t* bytes) noexcept {
  if (bytes != nullptr) *bytes = 0;
  if (params == nullptr) return null_params();
  if (bytes == nullptr) return null_bytes();
  size_t size = 0;
  AttentionParams p;
  Status status = to_cpp(*params, &p);
  if (status.ok()) status = flash::attention_workspace_size(p, &size);
  if (status.ok()) *bytes = size;
  return finish(status);
}

const char* flash_last_error_message(void) noexcept {
  return last_message;
}

const char* flash_status_string(flash_status_code code) noexcept {
  switch (code) {
    case FLASH_SUCCESS:
      return "success";
    case FLASH_INVALID_ARGUMENT:
      return "invalid argument";
    case FLASH_UNSUPPORTED:
      return "unsupported";
    case FLASH_CUDA_ERROR:
      return "CUDA error";
  }
  return "unknown status code";
}

const char* flash_version(void) noexcept {
  return flash::version();
}

}  // extern "C"
