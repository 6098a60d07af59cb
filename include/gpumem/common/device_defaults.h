#pragma once
// The device figures every command assumes unless told otherwise.
//
// kDefaultCudaOverheadBytes: the device memory a CUDA process holds that no allocator sees: the CUDA
// context (driver state and the kernels loaded into it) plus the libraries'
// handles and workspaces. One stated default for every command that answers
// "does it fit on the GPU" (`train`, `fit`, `llm`, `serve-sim`); each takes
// --overhead to replace it with what the user measured.
//
// Why 512 MiB (docs/train.md has the sources): with lazy module loading
// (CUDA >= 11.7, PyTorch's default since 1.13) the context of a PyTorch
// process is about 274 MiB (PyTorch PR #86509: 287,047,680 bytes, against
// 636 MiB with eager loading) to 426 MiB (PyTorch 2.10, CUDA 13, RTX 6000
// Ada, unsloth-zoo PR #1053); cuBLAS adds its workspaces (PyTorch sizes them
// 8 MiB per handle and stream, 32 MiB on Hopper) and cuDNN its own.
#include <cstdint>

namespace gpumem {

inline constexpr uint64_t kDefaultCudaOverheadBytes = uint64_t{512} << 20;

// Host to device over PCIe 4.0 x16 with pinned memory, as measured copies
// reach (about 25 GB/s of the link's 32): what streaming weights (`llm`)
// and swapping KV blocks (`serve-sim`) cost; `llm --pcie` replaces it.
inline constexpr double kDefaultPcieBytesPerSecond = 25e9;

}  // namespace gpumem
