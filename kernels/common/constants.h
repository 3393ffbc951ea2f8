// Hardware constants the kernels are built around, named once.
#pragma once

namespace flash {

// Dynamic shared memory one block may opt in to on sm_90 (and the most any
// configuration is compiled for; smaller devices are checked at run time).
inline constexpr int kMaxSmemPerBlock = 227 * 1024;
// A warpgroup: four consecutive warps issuing one wgmma together, over an
// m64 tile of rows.
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kWarpgroupRows = 64;
// TMA's 128-byte swizzle: tiles are stored as column blocks of 64 16-bit
// elements (128 bytes a row), each block aligned to the 1024-byte swizzle atom.
inline constexpr int kSwizzleBytes = 128;
inline constexpr int kSwizzleColumns = 64;
inline constexpr int kSwizzleAtomBytes = 1024;

}  // namespace flash
