// Fake device addresses, and a valid call on them, for the host tests that
// only check arguments (test_validate_host.cpp, test_contract_host.cpp,
// test_c_api_host.cpp). Region `index`
// starts at (index + 1) TiB: every address is 16-byte aligned, no two
// regions overlap, and nothing is ever dereferenced.
#pragma once

#include <cstdint>

#include "flash/flash.h"
#include "flash/flash.hpp"

namespace flash::test {

// A fake device address: region `index` starts at (index + 1) TiB.
inline void* fake_ptr(int index, int64_t byte_offset = 0) {
  return reinterpret_cast<void*>((uintptr_t{1} << 40) * static_cast<uintptr_t>(index + 1) +
                                 static_cast<uintptr_t>(byte_offset));
}

// The pointers and sizes of a valid GQA call: Q, K, V, O, LSE each in its
// own region (0 to 4); 2 sequences of 100 queries and 200 keys, 8 query heads
// over 2 KV heads, head_dim 128. For flash::AttentionParams and for
// flash_attention_params alike (the fields share their names and types).
template <typename Params>
void set_valid_gqa_call(Params& p) {
  p.q = fake_ptr(0);
  p.k = fake_ptr(1);
  p.v = fake_ptr(2);
  p.o = fake_ptr(3);
  p.lse = static_cast<float*>(fake_ptr(4));
  p.batch = 2;
  p.seqlen_q = 100;
  p.seqlen_k = 200;
  p.heads_q = 8;
  p.heads_kv = 2;
  p.head_dim = 128;
}

// That call in bf16, contiguous [B, N, H, D].
inline AttentionParams valid_params() {
  AttentionParams p;
  set_valid_gqa_call(p);
  p.dtype = DType::kBFloat16;
  p.set_contiguous_bnhd();
  return p;
}

// The same call through the C API: flash_attention_params_init, then
// flash_set_contiguous_bnhd.
inline flash_attention_params valid_c_params() {
  flash_attention_params p;
  flash_attention_params_init(&p);
  set_valid_gqa_call(p);
  p.dtype = FLASH_DTYPE_BFLOAT16;
  flash_set_contiguous_bnhd(&p);
  return p;
}

}  // namespace flash::test
