// The C API of flash/flash.h: each call converts its arguments to the C++
// AttentionParams and calls the C++ API, so both run the same checks. The
// message of the last call lives in a thread-local buffer.
#include <cstddef>
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

// ---- struct_size: which fields the caller's struct has ----
//
// A caller's struct is a prefix of this one: the fields of the flash.h it was
// compiled with. So that each such prefix ends where its sizeof does, every
// group of fields added to flash.h must end on a multiple of 8 bytes (pad
// explicitly if needed). A struct_size that is a multiple of 8 then never
// cuts a field (none of 8 bytes or less straddles such a boundary), and
// copying struct_size bytes copies whole fields. The granule is 8, not
// alignof of the struct, so that it stays 8 should a wider field ever join.
constexpr size_t kStructSizeGranule = 8;
// The smallest struct accepted: the fields through autotune, the core call.
constexpr size_t kMinStructSize = offsetof(flash_attention_params, autotune) + sizeof(flash_attention_params::autotune);
static_assert(offsetof(flash_attention_params, struct_size) == 0, "struct_size must come first");
static_assert(kMinStructSize % kStructSizeGranule == 0 &&
                  offsetof(flash_attention_params, cu_seqlens_q) == kMinStructSize,
              "the core fields must end on a multiple of 8 bytes, where the next field starts");
static_assert(sizeof(flash_attention_params) ==
                  offsetof(flash_attention_params, total_k) + sizeof(flash_attention_params::total_k),
              "the last field must end the struct: a tail padding would hold a later version's first field");
static_assert(sizeof(flash_attention_params) % kStructSizeGranule == 0, "the struct must end on a multiple of 8");
// No version of the struct will come near this size; a struct_size past it
// is garbage (a struct never passed to flash_attention_params_init), not a
// newer caller's.
constexpr size_t kGarbageStructSize = size_t{1} << 16;
static_assert(sizeof(flash_attention_params) < kGarbageStructSize / 16, "the struct has outgrown kGarbageStructSize");

// Whether this library can read a struct of `size` bytes; the message says
// why not.
Status check_struct_size(size_t size) noexcept {
  if (size == 0) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size is 0, which flash_attention_params_init sets to "
                                      "sizeof(flash_attention_params); start the struct with "
                                      "flash_attention_params_init");
  }
  if (size < kMinStructSize) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is below the smallest flash_attention_params (%zu bytes, "
                                      "the fields through autotune); start the struct with "
                                      "flash_attention_params_init",
                                      size, kMinStructSize);
  }
  if (size >= kGarbageStructSize) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is the size of no flash_attention_params (this library's "
                                      "has %zu bytes); start the struct with flash_attention_params_init",
                                      size, sizeof(flash_attention_params));
  }
  if (size > sizeof(flash_attention_params)) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is larger than this library's flash_attention_params "
                                      "(%zu bytes, flash %s): the caller was compiled against a newer "
                                      "flash/flash.h, whose new fields this library cannot honour; link the "
                                      "library of the headers you compile with",
                                      size, sizeof(flash_attention_params), FLASH_VERSION_STRING);
  }
  if (size % kStructSizeGranule != 0) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is not a multiple of %zu, so not the size of any "
                                      "flash_attention_params; start the struct with flash_attention_params_init",
                                      size, kStructSizeGranule);
  }
  return Status{};
}

size_t struct_size_of(const flash_attention_params* params) noexcept {
  size_t size;
  std::memcpy(&size, params, sizeof(size));
  return size;
}

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

// Copies from `src` to `dst`, C to C++ or C++ to C, the fields both structs
// name alike and hold as they are: copy_sizes the sizes, copy_strides the
// strides, copy_same_fields those and the pointers, the softmax scale and the
// inference-engine fields. The enum and bool fields, which a C caller may
// fill with any bytes, are left to to_cpp and to_c.
template <typename Src, typename Dst>
void copy_sizes(const Src& src, Dst& dst) noexcept {
  dst.batch = src.batch;
  dst.seqlen_q = src.seqlen_q;
  dst.seqlen_k = src.seqlen_k;
  dst.heads_q = src.heads_q;
  dst.heads_kv = src.heads_kv;
  dst.head_dim = src.head_dim;
}

template <typename Src, typename Dst>
void copy_strides(const Src& src, Dst& dst) noexcept {
  dst.q_batch_stride = src.q_batch_stride;
  dst.q_seq_stride = src.q_seq_stride;
  dst.q_head_stride = src.q_head_stride;
  dst.k_batch_stride = src.k_batch_stride;
  dst.k_seq_stride = src.k_seq_stride;
  dst.k_head_stride = src.k_head_stride;
  dst.v_batch_stride = src.v_batch_stride;
  dst.v_seq_stride = src.v_seq_stride;
  dst.v_head_stride = src.v_head_stride;
  dst.o_batch_stride = src.o_batch_stride;
  dst.o_seq_stride = src.o_seq_stride;
  dst.o_head_stride = src.o_head_stride;
  dst.q_dim_stride = src.q_dim_stride;
  dst.k_dim_stride = src.k_dim_stride;
  dst.v_dim_stride = src.v_dim_stride;
  dst.o_dim_stride = src.o_dim_stride;
}

template <typename Src, typename Dst>
void copy_same_fields(const Src& src, Dst& dst) noexcept {
  dst.q = src.q;
  dst.k = src.k;
  dst.v = src.v;
  dst.o = src.o;
  dst.lse = src.lse;
  copy_sizes(src, dst);
  copy_strides(src, dst);
  dst.softmax_scale = src.softmax_scale;
  dst.cu_seqlens_q = src.cu_seqlens_q;
  dst.cu_seqlens_k = src.cu_seqlens_k;
  dst.seqused_k = src.seqused_k;
  dst.block_table = src.block_table;
  dst.block_table_batch_stride = src.block_table_batch_stride;
  dst.max_pages_per_seq = src.max_pages_per_seq;
  dst.page_size = src.page_size;
  dst.num_pages = src.num_pages;
  dst.window_left = src.window_left;
  dst.window_right = src.window_right;
  dst.softcap = src.softcap;
  dst.num_splits = src.num_splits;
  dst.workspace = src.workspace;
  dst.workspace_bytes = src.workspace_bytes;
  dst.total_q = src.total_q;
  dst.total_k = src.total_k;
}

// Converts `c` to *p, or says which bool field holds neither 0 nor 1. The
// enum fields go through as their integers (DType and Backend are int32_t
// enums, so every value is representable); validate() rejects unknown ones.
// `c` is whole: read_caller_params has filled what the caller's struct lacks.
Status to_cpp(const flash_attention_params& c, AttentionParams* out) noexcept {
  const auto causal = raw_value<unsigned char>(c.causal);
  if (causal > 1) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "causal holds the byte %d; a bool must be 0 (false) or 1 (true)",
                                      static_cast<int>(causal));
  }
  AttentionParams& p = *out;
  p = AttentionParams{};
  copy_same_fields(c, p);
  p.dtype = static_cast<DType>(raw_value<int32_t>(c.dtype));
  p.causal = causal != 0;
  p.backend = static_cast<Backend>(raw_value<int32_t>(c.backend));
  p.autotune = c.autotune != 0;
  return Status{};
}

void to_c(const AttentionParams& p, flash_attention_params* c) noexcept {
  copy_same_fields(p, *c);
  const auto dtype = static_cast<int32_t>(p.dtype);
  std::memcpy(&c->dtype, &dtype, sizeof(dtype));
  c->causal = p.causal;
  const auto backend = static_cast<int32_t>(p.backend);
  std::memcpy(&c->backend, &backend, sizeof(backend));
  c->autotune = p.autotune ? 1 : 0;
}

// The defaults, padding zeroed: what flash_attention_params_init writes.
flash_attention_params default_c_params() noexcept {
  flash_attention_params c;
  std::memset(&c, 0, sizeof(c));
  to_c(AttentionParams{}, &c);
  c.struct_size = sizeof(c);
  return c;
}

// The caller's struct converted to C++ parameters: the fields within its
// struct_size as it set them, every later one at its default.
Status read_caller_params(const flash_attention_params* caller, AttentionParams* out) noexcept {
  const size_t size = struct_size_of(caller);
  const Status accepted = check_struct_size(size);
  if (!accepted.ok()) return accepted;
  flash_attention_params c = default_c_params();
  std::memcpy(&c, caller, size);
  return to_cpp(c, out);
}

// Fills the strides of `c` with the C++ helper `fill`, from the sizes alone:
// every other field, garbage or not, stays as it is. The sizes and strides
// are core fields, which every accepted struct has.
void set_contiguous(flash_attention_params* c, void (AttentionParams::*fill)() noexcept) noexcept {
  if (!check_struct_size(struct_size_of(c)).ok()) return;
  AttentionParams p;
  copy_sizes(*c, p);
  (p.*fill)();
  copy_strides(p, *c);
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

void flash_attention_params_init_sized(flash_attention_params* params, size_t struct_size) noexcept {
  if (params == nullptr) return;
  if (check_struct_size(struct_size).ok()) {
    const flash_attention_params defaults = default_c_params();
    std::memcpy(params, &defaults, struct_size);
  }
  if (struct_size >= sizeof(struct_size)) std::memcpy(params, &struct_size, sizeof(struct_size));
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
  const Status converted = read_caller_params(params, &p);
  return finish(converted.ok() ? flash::validate(p) : converted);
}

flash_status_code flash_attention_forward(const flash_attention_params* params, void* stream) noexcept {
  if (params == nullptr) return null_params();
  AttentionParams p;
  const Status converted = read_caller_params(params, &p);
  return finish(converted.ok() ? flash::attention_forward(p, static_cast<CUstream_st*>(stream)) : converted);
}

flash_status_code flash_attention_workspace_size(const flash_attention_params* params, size_t* bytes) noexcept {
  if (bytes != nullptr) *bytes = 0;
  if (params == nullptr) return null_params();
  if (bytes == nullptr) return null_bytes();
  size_t size = 0;
  AttentionParams p;
  Status status = read_caller_params(params, &p);
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
