// The CUDA element type of each flash::DType, for the launchers.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flash/flash.hpp"

namespace flash {

template <DType kDType>
struct ElementOf;
template <> struct ElementOf<DType::kFloat16> { using type = __half; };
template <> struct ElementOf<DType::kBFloat16> { using type = __nv_bfloat16; };

}  // namespace flash
