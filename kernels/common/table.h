// The contract between a build and the shared binding (common/binding.cpp, compiled once per torch and CUDA
// version): a build exports one table of its launch functions, elu_kernel_table(), and the binding registers a
// dispatcher operator over it at run time. No torch header here: a build compiles its kernel file and this.
#pragma once
#include <cstdint>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>

namespace elu {

// Bump when the layout changes: the binding refuses a table of another version.
constexpr int kKernelTableVersion = 1;

struct KernelTable {
  int version;
  // Every build: x and y hold n contiguous floats (y may be x: in place), n > 0, on the current device.
  void (*launch_elu)(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);
  // Every build (common/backward.cu): grad_in from grad and x (or, with is_result, from y = ELU(x)).
  void (*launch_elu_backward)(const float* g, const float* x_or_y, float* out, int64_t n, float alpha,
                              bool is_result, cudaStream_t stream);
  // "// elu-study: binding = storage16": 16-bit x and y (bfloat16 if bf16, else float16); else null.
  void (*launch_elu_16)(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream);
  // "// elu-study: binding = backward16": the 16-bit backward; else null.
  void (*launch_elu_backward_16)(const void* g, const void* x_or_y, void* out, int64_t n, float alpha,
                                 bool is_result, bool bf16, cudaStream_t stream);
  // "// elu-study: binding = launch-shape": the launch chosen at run time, process-wide; else null.
  void (*set_launch_shape)(int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm);
  std::vector<std::tuple<int64_t, int64_t, bool, bool>> (*launch_shapes)();  // (threads, vectors, hints, grid_stride)
};

}  // namespace elu
