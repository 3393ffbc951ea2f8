// The C API of flash/flash.h: each call converts its arguments to the C++
// AttentionParams or MergeParams and calls the C++ API, so both run the same
// checks. The message of the last call lives in a thread-local buffer.
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
using flash::KvDType;
using flash::MergeParams;
using flash::Status;
using flash::StatusCode;

static_assert(static_cast<int>(FLASH_DTYPE_FLOAT16) == static_cast<int>(DType::kFloat16) &&
                  static_cast<int>(FLASH_DTYPE_BFLOAT16) == static_cast<int>(DType::kBFloat16),
              "flash_dtype must match flash::DType");
static_assert(static_cast<int>(FLASH_KV_DTYPE_SAME) == static_cast<int>(KvDType::kSame) &&
                  static_cast<int>(FLASH_KV_DTYPE_FLOAT8_E4M3) == static_cast<int>(KvDType::kFloat8E4M3),
              "flash_kv_dtype must match flash::KvDType");
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
static_assert(std::is_standard_layout<flash_merge_params>::value, "flash_merge_params must be plain C");
// The inference-engine fields of flash_attention_params but kv_dtype (an
// enum) and rotary_interleaved (a bool in C++), and every field of
// flash_merge_params but dtype, carry the C++ types unchanged, so to_cpp and
// to_c copy them without conversion.
#define FLASH_SAME_FIELD_TYPE(C, Cpp, field)                                   \
  static_assert(std::is_same<decltype(C::field), decltype(Cpp::field)>::value, \
                #C "::" #field " must have the type of " #Cpp "::" #field)
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, cu_seqlens_q);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, cu_seqlens_k);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, seqused_k);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, block_table);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, block_table_batch_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, max_pages_per_seq);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, page_size);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, num_pages);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, window_left);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, window_right);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, softcap);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, num_splits);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, workspace);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, workspace_bytes);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, total_q);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, total_k);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, sinks);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, alibi_slopes);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, head_dim_v);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, k_new);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, v_new);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, seqlen_new);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, cu_seqlens_k_new);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, k_new_batch_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, k_new_seq_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, k_new_head_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, v_new_batch_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, v_new_seq_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, v_new_head_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, rotary_cos);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, rotary_sin);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, rotary_dim);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, rotary_positions);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, k_descale);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, v_descale);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, descale_head_stride);
FLASH_SAME_FIELD_TYPE(flash_attention_params, AttentionParams, q_descale);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, num_states);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, batch);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, seqlen_q);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, heads);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, head_dim);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_states);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_state_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_states_batch_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_states_seq_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_states_head_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, lse_states);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, lse_state_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_batch_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_seq_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, o_head_stride);
FLASH_SAME_FIELD_TYPE(flash_merge_params, MergeParams, lse);
#undef FLASH_SAME_FIELD_TYPE

// ---- struct_size: which fields the caller's struct has ----
//
// The same rules for each growable struct, flash_attention_params and
// flash_merge_params (StructInfo below says what differs). A caller's struct
// is a prefix of the library's: the fields of the flash.h it was compiled
// with. So that each such prefix ends where its sizeof does, every group of
// fields added to flash.h must end on a multiple of 8 bytes (pad explicitly
// if needed). A struct_size that is a multiple of 8 then never cuts a field
// (none of 8 bytes or less straddles such a boundary), and copying
// struct_size bytes copies whole fields. The granule is 8, not alignof of
// the struct, so that it stays 8 should a wider field ever join.
constexpr size_t kStructSizeGranule = 8;

// What the struct_size checks and messages need of each growable struct: its
// C++ counterpart, its name, the function that starts it, and the smallest
// struct accepted (every field through kLastCoreField).
template <typename C>
struct StructInfo;

template <>
struct StructInfo<flash_attention_params> {
  using Cpp = AttentionParams;
  static constexpr const char* kName = "flash_attention_params";
  static constexpr const char* kInit = "flash_attention_params_init";
  // The core call, the smallest struct there is.
  static constexpr const char* kLastCoreField = "autotune";
  static constexpr size_t kMinSize =
      offsetof(flash_attention_params, autotune) + sizeof(flash_attention_params::autotune);
};

template <>
struct StructInfo<flash_merge_params> {
  using Cpp = MergeParams;
  static constexpr const char* kName = "flash_merge_params";
  static constexpr const char* kInit = "flash_merge_params_init";
  // The required fields: all but the optional lse.
  static constexpr const char* kLastCoreField = "o_head_stride";
  static constexpr size_t kMinSize =
      offsetof(flash_merge_params, o_head_stride) + sizeof(flash_merge_params::o_head_stride);
};

static_assert(offsetof(flash_attention_params, struct_size) == 0, "struct_size must come first");
static_assert(StructInfo<flash_attention_params>::kMinSize % kStructSizeGranule == 0 &&
                  offsetof(flash_attention_params, cu_seqlens_q) == StructInfo<flash_attention_params>::kMinSize,
              "the core fields must end on a multiple of 8 bytes, where the next field starts");
static_assert(offsetof(flash_attention_params, kv_dtype) ==
                  offsetof(flash_attention_params, rotary_interleaved) +
                      sizeof(flash_attention_params::rotary_interleaved),
              "the fp8 KV cache's fields must start where the struct before them ended");
static_assert(offsetof(flash_attention_params, q_dtype) ==
                  offsetof(flash_attention_params, descale_head_stride) +
                      sizeof(flash_attention_params::descale_head_stride),
              "the FP8 prefill's fields must start where the struct before them ended");
static_assert(sizeof(flash_attention_params) ==
                  offsetof(flash_attention_params, q_descale) + sizeof(flash_attention_params::q_descale),
              "the last field must end the struct: a tail padding would hold a later version's first field");
static_assert(sizeof(flash_attention_params) % kStructSizeGranule == 0, "the struct must end on a multiple of 8");

static_assert(offsetof(flash_merge_params, struct_size) == 0, "struct_size must come first");
static_assert(StructInfo<flash_merge_params>::kMinSize % kStructSizeGranule == 0 &&
                  offsetof(flash_merge_params, lse) == StructInfo<flash_merge_params>::kMinSize,
              "the required fields must end on a multiple of 8 bytes, where lse starts");
static_assert(sizeof(flash_merge_params) == offsetof(flash_merge_params, lse) + sizeof(flash_merge_params::lse),
              "the last field must end the struct: a tail padding would hold a later version's first field");
static_assert(sizeof(flash_merge_params) % kStructSizeGranule == 0, "the struct must end on a multiple of 8");

// No version of either struct will come near this size; a struct_size past
// it is garbage (a struct never passed to its init), not a newer caller's.
constexpr size_t kGarbageStructSize = size_t{1} << 16;
static_assert(sizeof(flash_attention_params) < kGarbageStructSize / 16, "the struct has outgrown kGarbageStructSize");
static_assert(sizeof(flash_merge_params) < kGarbageStructSize / 16, "the struct has outgrown kGarbageStructSize");

// Whether this library can read a C struct of `size` bytes; the message
// says why not.
template <typename C>
Status check_struct_size(size_t size) noexcept {
  using Info = StructInfo<C>;
  if (size == 0) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size is 0, which %s sets to sizeof(%s); start the struct with %s",
                                      Info::kInit, Info::kName, Info::kInit);
  }
  if (size < Info::kMinSize) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is below the smallest %s (%zu bytes, the fields through "
                                      "%s); start the struct with %s",
                                      size, Info::kName, Info::kMinSize, Info::kLastCoreField, Info::kInit);
  }
  if (size >= kGarbageStructSize) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is the size of no %s (this library's has %zu bytes); start "
                                      "the struct with %s",
                                      size, Info::kName, sizeof(C), Info::kInit);
  }
  if (size > sizeof(C)) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is larger than this library's %s (%zu bytes, flash %s): the "
                                      "caller was compiled against a newer flash/flash.h, whose new fields this "
                                      "library cannot honour; link the library of the headers you compile with",
                                      size, Info::kName, sizeof(C), FLASH_VERSION_STRING);
  }
  if (size % kStructSizeGranule != 0) {
    return flash::detail::make_status(StatusCode::kInvalidArgument,
                                      "struct_size %zu is not a multiple of %zu, so not the size of any %s; start "
                                      "the struct with %s",
                                      size, kStructSizeGranule, Info::kName, Info::kInit);
  }
  return Status{};
}

template <typename C>
size_t struct_size_of(const C* params) noexcept {
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
static_assert(sizeof(flash_dtype) == sizeof(int32_t) && sizeof(flash_backend) == sizeof(int32_t) &&
                  sizeof(flash_kv_dtype) == sizeof(int32_t),
              "the C enums must be 32-bit");
static_assert(sizeof(bool) == sizeof(unsigned char), "bool must be one byte");
// So that every int32_t a C caller leaves in an enum field converts to the
// C++ enum (validate() then rejects the unknown ones).
static_assert(std::is_same<std::underlying_type<DType>::type, int32_t>::value &&
                  std::is_same<std::underlying_type<Backend>::type, int32_t>::value &&
                  std::is_same<std::underlying_type<KvDType>::type, int32_t>::value,
              "DType, Backend and KvDType must be int32_t enums");
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
  dst.sinks = src.sinks;
  dst.alibi_slopes = src.alibi_slopes;
  dst.head_dim_v = src.head_dim_v;
  dst.k_new = src.k_new;
  dst.v_new = src.v_new;
  dst.seqlen_new = src.seqlen_new;
  dst.cu_seqlens_k_new = src.cu_seqlens_k_new;
  dst.k_new_batch_stride = src.k_new_batch_stride;
  dst.k_new_seq_stride = src.k_new_seq_stride;
  dst.k_new_head_stride = src.k_new_head_stride;
  dst.v_new_batch_stride = src.v_new_batch_stride;
  dst.v_new_seq_stride = src.v_new_seq_stride;
  dst.v_new_head_stride = src.v_new_head_stride;
  dst.rotary_cos = src.rotary_cos;
  dst.rotary_sin = src.rotary_sin;
  dst.rotary_dim = src.rotary_dim;
  dst.rotary_positions = src.rotary_positions;
  dst.k_descale = src.k_descale;
  dst.v_descale = src.v_descale;
  dst.descale_head_stride = src.descale_head_stride;
  dst.q_descale = src.q_descale;
}

// Converts `c` to *p, or says which bool field holds neither 0 nor 1. The
// enum fields go through as their integers (DType, Backend and KvDType are
// int32_t enums, so every value is representable); validate() rejects
// unknown ones.
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
  p.rotary_interleaved = c.rotary_interleaved != 0;
  p.kv_dtype = static_cast<KvDType>(raw_value<int32_t>(c.kv_dtype));
  p.q_dtype = static_cast<KvDType>(raw_value<int32_t>(c.q_dtype));
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
  c->rotary_interleaved = p.rotary_interleaved ? 1 : 0;
  const auto kv_dtype = static_cast<int32_t>(p.kv_dtype);
  std::memcpy(&c->kv_dtype, &kv_dtype, sizeof(kv_dtype));
  const auto q_dtype = static_cast<int32_t>(p.q_dtype);
  std::memcpy(&c->q_dtype, &q_dtype, sizeof(q_dtype));
}

// The same for flash_merge_params and MergeParams: every field but dtype.
template <typename Src, typename Dst>
void copy_merge_sizes(const Src& src, Dst& dst) noexcept {
  dst.num_states = src.num_states;
  dst.batch = src.batch;
  dst.seqlen_q = src.seqlen_q;
  dst.heads = src.heads;
  dst.head_dim = src.head_dim;
}

template <typename Src, typename Dst>
void copy_merge_strides(const Src& src, Dst& dst) noexcept {
  dst.o_state_stride = src.o_state_stride;
  dst.o_states_batch_stride = src.o_states_batch_stride;
  dst.o_states_seq_stride = src.o_states_seq_stride;
  dst.o_states_head_stride = src.o_states_head_stride;
  dst.lse_state_stride = src.lse_state_stride;
  dst.o_batch_stride = src.o_batch_stride;
  dst.o_seq_stride = src.o_seq_stride;
  dst.o_head_stride = src.o_head_stride;
}

template <typename Src, typename Dst>
void copy_merge_same_fields(const Src& src, Dst& dst) noexcept {
  copy_merge_sizes(src, dst);
  copy_merge_strides(src, dst);
  dst.o_states = src.o_states;
  dst.lse_states = src.lse_states;
  dst.o = src.o;
  dst.lse = src.lse;
}

// Converts `c` to *p. dtype goes through as its integer, as in the attention
// to_cpp; validate() rejects unknown values before anything uses them.
Status to_cpp(const flash_merge_params& c, MergeParams* out) noexcept {
  MergeParams& p = *out;
  p = MergeParams{};
  copy_merge_same_fields(c, p);
  p.dtype = static_cast<DType>(raw_value<int32_t>(c.dtype));
  return Status{};
}

void to_c(const MergeParams& p, flash_merge_params* c) noexcept {
  copy_merge_same_fields(p, *c);
  const auto dtype = static_cast<int32_t>(p.dtype);
  std::memcpy(&c->dtype, &dtype, sizeof(dtype));
}

// What set_contiguous moves, per struct: the sizes of `c` into `p`, the
// strides of `p` back into `c`.
void sizes_to_cpp(const flash_attention_params& c, AttentionParams& p) noexcept {
  copy_sizes(c, p);
  // head_dim_v and seqlen_new are not core fields: a struct without them
  // means head_dim and no new rows.
  const size_t size = struct_size_of(&c);
  if (size >= offsetof(flash_attention_params, head_dim_v) + sizeof(c.head_dim_v)) p.head_dim_v = c.head_dim_v;
  if (size >= offsetof(flash_attention_params, seqlen_new) + sizeof(c.seqlen_new)) p.seqlen_new = c.seqlen_new;
}
void sizes_to_cpp(const flash_merge_params& c, MergeParams& p) noexcept {
  copy_merge_sizes(c, p);
}
void strides_to_c(const AttentionParams& p, flash_attention_params& c) noexcept {
  copy_strides(p, c);
  // k_new's and v_new's, written only into a struct that has them.
  if (struct_size_of(&c) >= offsetof(flash_attention_params, v_new_head_stride) + sizeof(c.v_new_head_stride)) {
    c.k_new_batch_stride = p.k_new_batch_stride;
    c.k_new_seq_stride = p.k_new_seq_stride;
    c.k_new_head_stride = p.k_new_head_stride;
    c.v_new_batch_stride = p.v_new_batch_stride;
    c.v_new_seq_stride = p.v_new_seq_stride;
    c.v_new_head_stride = p.v_new_head_stride;
  }
}
void strides_to_c(const MergeParams& p, flash_merge_params& c) noexcept {
  copy_merge_strides(p, c);
}

// ---- Shared by both structs ----

// The defaults, padding zeroed: what the struct's init writes.
template <typename C>
C default_c_params() noexcept {
  C c;
  std::memset(&c, 0, sizeof(c));
  to_c(typename StructInfo<C>::Cpp{}, &c);
  c.struct_size = sizeof(c);
  return c;
}

// The caller's struct converted to C++ parameters: the fields within its
// struct_size as it set them, every later one at its default.
template <typename C>
Status read_caller_params(const C* caller, typename StructInfo<C>::Cpp* out) noexcept {
  const size_t size = struct_size_of(caller);
  const Status accepted = check_struct_size<C>(size);
  if (!accepted.ok()) return accepted;
  C c = default_c_params<C>();
  std::memcpy(&c, caller, size);
  return to_cpp(c, out);
}

// The struct's init: the defaults within struct_size bytes when the library
// accepts that size, and struct_size itself when it fits.
template <typename C>
void init_sized(C* params, size_t struct_size) noexcept {
  if (params == nullptr) return;
  if (check_struct_size<C>(struct_size).ok()) {
    const C defaults = default_c_params<C>();
    std::memcpy(params, &defaults, struct_size);
  }
  if (struct_size >= sizeof(struct_size)) std::memcpy(params, &struct_size, sizeof(struct_size));
}

// Fills the strides of `c` with the C++ helper `fill`, from the sizes alone:
// every other field, garbage or not, stays as it is. The sizes and strides
// are core fields, which every accepted struct has.
template <typename C>
void set_contiguous(C* c, void (StructInfo<C>::Cpp::*fill)() noexcept) noexcept {
  if (!check_struct_size<C>(struct_size_of(c)).ok()) return;
  typename StructInfo<C>::Cpp p;
  sizes_to_cpp(*c, p);
  (p.*fill)();
  strides_to_c(p, *c);
}

// Records `status` as this thread's last message and returns its code.
flash_status_code finish(const Status& status) noexcept {
  static_assert(sizeof(last_message) == sizeof(status.message), "message buffers differ");
  std::memcpy(last_message, status.message, sizeof(last_message));
  last_message[sizeof(last_message) - 1] = '\0';
  return static_cast<flash_status_code>(status.code);
}

template <typename C>
flash_status_code null_params() noexcept {
  return finish(flash::detail::make_status(StatusCode::kInvalidArgument, "params is null; pass a %s filled in after %s",
                                           StructInfo<C>::kName, StructInfo<C>::kInit));
}

// Reads the caller's struct into its C++ counterpart and returns what `call`
// makes of it, or why the struct could not be read; records the message.
template <typename C, typename F>
flash_status_code call_with_cpp(const C* params, F&& call) noexcept {
  if (params == nullptr) return null_params<C>();
  typename StructInfo<C>::Cpp p;
  const Status converted = read_caller_params(params, &p);
  return finish(converted.ok() ? call(p) : converted);
}

flash_status_code null_bytes() noexcept {
  return finish(flash::detail::make_status(StatusCode::kInvalidArgument,
                                           "bytes is null; pass the address of a size_t to receive the "
                                           "workspace size"));
}

}  // namespace

extern "C" {

void flash_attention_params_init_sized(flash_attention_params* params, size_t struct_size) noexcept {
  init_sized(params, struct_size);
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
  return call_with_cpp(params, [](const AttentionParams& p) { return flash::validate(p); });
}

flash_status_code flash_attention_forward(const flash_attention_params* params, void* stream) noexcept {
  return call_with_cpp(params, [stream](const AttentionParams& p) {
    return flash::attention_forward(p, static_cast<CUstream_st*>(stream));
  });
}

flash_status_code flash_attention_workspace_size(const flash_attention_params* params, size_t* bytes) noexcept {
  if (bytes != nullptr) *bytes = 0;
  if (params == nullptr) return null_params<flash_attention_params>();
  if (bytes == nullptr) return null_bytes();
  size_t size = 0;
  AttentionParams p;
  Status status = read_caller_params(params, &p);
  if (status.ok()) status = flash::attention_workspace_size(p, &size);
  if (status.ok()) *bytes = size;
  return finish(status);
}

void flash_merge_params_init_sized(flash_merge_params* params, size_t struct_size) noexcept {
  init_sized(params, struct_size);
}

void flash_merge_set_contiguous(flash_merge_params* params) noexcept {
  if (params == nullptr) return;
  set_contiguous(params, &MergeParams::set_contiguous);
}

flash_status_code flash_validate_merge(const flash_merge_params* params) noexcept {
  return call_with_cpp(params, [](const MergeParams& p) { return flash::validate(p); });
}

flash_status_code flash_merge_states(const flash_merge_params* params, void* stream) noexcept {
  return call_with_cpp(params, [stream](const MergeParams& p) {
    return flash::merge_states(p, static_cast<CUstream_st*>(stream));
  });
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
