/*===- gpipe_cuda.h - Make the CUDA backend available to sessions -*- C -*-===*
 *
 * An application that links the CUDA backend (runtime/cuda, GPipeCuda) calls
 * this once before creating a session with GPIPE_DEVICE_CUDA; the runtime
 * library itself does not depend on CUDA. Thread-safe; calling it again is
 * harmless.
 *
 *===----------------------------------------------------------------------===*/

#ifndef GPIPE_CUDA_GPIPE_CUDA_H
#define GPIPE_CUDA_GPIPE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

void gpipe_register_cuda_backend(void);

#ifdef __cplusplus
}
#endif

#endif /* GPIPE_CUDA_GPIPE_CUDA_H */
