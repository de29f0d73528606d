/*===- GeneratedKernels.c - Stand-ins for compiler-generated kernels ------===//
 *
 * What the compiler's code generation will put in a bundle (Bundle::code),
 * written by hand for the runtime's tests: element-wise kernels with MLIR's
 * C interface, `void gpipe_kernel_<k>_<tag>(void **args)`, args pointing at
 * 1-D f32 memref descriptors, the inputs first and the output last. Each
 * reads element i of every input and then writes element i of the output,
 * in order, honouring the descriptors' offset and stride, as a generated
 * loop does. Built twice, with two tags, for "code of another bundle".
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>

#ifndef GPIPE_TEST_KERNEL_TAG
#define GPIPE_TEST_KERNEL_TAG test
#endif
#define GPIPE_PASTE(a, b) a##b
#define GPIPE_NAME(index, tag) GPIPE_PASTE(gpipe_kernel_##index##_, tag)
#define GPIPE_KERNEL(index) GPIPE_NAME(index, GPIPE_TEST_KERNEL_TAG)

typedef struct {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t size;
  int64_t stride;
} MemRef1D;

static float at(void *arg, int64_t i) {
  MemRef1D *m = (MemRef1D *)arg;
  return m->aligned[m->offset + i * m->stride];
}

static void set(void *arg, int64_t i, float value) {
  MemRef1D *m = (MemRef1D *)arg;
  m->aligned[m->offset + i * m->stride] = value;
}

static int64_t sizeOf(void *arg) { return ((MemRef1D *)arg)->size; }

/* add(in0,in1)->t0; relu(t0)->out */
void GPIPE_KERNEL(0)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[2]); ++i) {
    float t = at(args[0], i) + at(args[1], i);
    set(args[2], i, t > 0.0f ? t : 0.0f);
  }
}

/* mul(in0,in1)->t0; sub(t0,in2)->out */
void GPIPE_KERNEL(1)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[3]); ++i)
    set(args[3], i, at(args[0], i) * at(args[1], i) - at(args[2], i));
}

/* relu_grad(in0 = dy, in1 = y)->out: dy where the relu passed */
void GPIPE_KERNEL(2)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[2]); ++i)
    set(args[2], i, at(args[1], i) > 0.0f ? at(args[0], i) : 0.0f);
}
