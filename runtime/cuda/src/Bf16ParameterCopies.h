//===- Bf16ParameterCopies.h - Parameters in bf16, once a step -*- C++ -*-===//
//
// The CUDA backend's BF16 GEMMs read a parameter B (GemmBatch::bIsParameter)
// from a bf16 copy kept here: the step's first GEMM that reads it converts
// it, the others reuse the copy until the backend's synchronize
// (`stepEnded`), after which the optimizer may have changed it. One
// conversion per step instead of one per GEMM.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_CUDA_BF16PARAMETERCOPIES_H
#define GPIPE_CUDA_BF16PARAMETERCOPIES_H

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace gpipe::cuda::detail {

class Bf16ParameterCopies {
public:
  Bf16ParameterCopies() = default;
  ~Bf16ParameterCopies();
  Bf16ParameterCopies(const Bf16ParameterCopies &) = delete;
  Bf16ParameterCopies &operator=(const Bf16ParameterCopies &) = delete;

  /// The bf16 copy of the `elements` floats at `param` (pipeline device
  /// `device`, on the current GPU `gpu`), converted on `stream` if not yet
  /// since the last stepEnded. On an error, `*copy` is null and `what` says
  /// which call failed.
  cudaError_t copyOf(const float *param, size_t elements, unsigned device,
                     int gpu, cudaStream_t stream, const void **copy,
                     const char **what);
  /// The parameters may change now: each copy is converted again at its
  /// next use.
  void stepEnded();
  /// Bytes of the copies of pipeline device `device`.
  int64_t bytesOn(unsigned device) const;

private:
  struct Copy {
    void *data = nullptr;
    size_t elements = 0;
    unsigned device = 0;
    int gpu = -1;
    bool current = false; ///< converted since the last stepEnded
  };
  std::map<const float *, Copy> copies;
  /// Copies replaced by larger ones: a GEMM issued earlier may still read
  /// them, so they are freed with the rest.
  std::vector<Copy> retired;
};

} // namespace gpipe::cuda::detail

#endif // GPIPE_CUDA_BF16PARAMETERCOPIES_H
