// Appended to every build's CUDA source by elu_study.core.build: the table of its launch functions that the
// shared binding reads (common/table.h). A kernel file that lacks launch_elu, or a function its
// "// elu-study: binding = ..." line promises, fails to link, naming the missing prototype.
#include "common/table.h"

void launch_elu(const float* x, float* y, int64_t n, float alpha, cudaStream_t stream);
void launch_elu_backward(const float* g, const float* x_or_y, float* out, int64_t n, float alpha, bool is_result,
                         cudaStream_t stream);
#ifdef ELU_BINDING_STORAGE16
void launch_elu_16(const void* x, void* y, int64_t n, float alpha, bool bf16, cudaStream_t stream);
#endif
#ifdef ELU_BINDING_BACKWARD16
void launch_elu_backward_16(const void* g, const void* x_or_y, void* out, int64_t n, float alpha, bool is_result,
                            bool bf16, cudaStream_t stream);
#endif
#ifdef ELU_BINDING_LAUNCH_SHAPE
void elu_set_launch_shape(int64_t threads, int64_t vectors, bool hints, int64_t blocks_per_sm);
std::vector<std::tuple<int64_t, int64_t, bool, bool>> elu_launch_shapes();
#endif

extern "C" __attribute__((visibility("default"))) const elu::KernelTable* elu_kernel_table() {
  static const elu::KernelTable table = {
      elu::kKernelTableVersion,
      &launch_elu,
      &launch_elu_backward,
#ifdef ELU_BINDING_STORAGE16
      &launch_elu_16,
#else
      nullptr,
#endif
#ifdef ELU_BINDING_BACKWARD16
      &launch_elu_backward_16,
#else
      nullptr,
#endif
#ifdef ELU_BINDING_LAUNCH_SHAPE
      &elu_set_launch_shape,
      &elu_launch_shapes,
#else
      nullptr,
      nullptr,
#endif
  };
  return &table;
}
