/*===- GeneratedKernels.c - Stand-ins for compiler-generated kernels ------===//
 *
 * What the compiler's code generation will put in a bundle (Bundle::code),
 * written by hand for the runtime's tests: kernels with MLIR's C interface,
 * `void gpipe_kernel_<k>_<tag>(void **args)`, args pointing at f32 memref
 * descriptors (StridedMemRefType<float, r>, declared here per rank as MLIR
 * lays them out), the inputs first and the output last. Kernels 0 to 2 are
 * element-wise over one dimension: each reads element i of every input and
 * then writes element i of the output, in order. Kernels 3 to 6 have two
 * dimensions: a broadcasting add, a row sum, a column sum and a row sum plus
 * a vector; the sums
 * accumulate in their output, zeroed first, as a generated reduction does.
 * Kernels 7 to 9 have memrefs of fixed extents along dimension 1 (their
 * offsets and steps written here, as the compiler compiles them in): a
 * slice, its gradient (which writes its whole output, zeros outside the
 * window) and a concat.
 * Kernels 10 to 13 are element-wise over one dimension with i32 memrefs
 * (GeneratedKernelSpec::types; StridedMemRefType<int32_t, 1>, laid out as
 * the f32 one): a comparison writing 0 or 1 words, `where` reading such a
 * mask (any word but 0 is true, as the compiler reads an i1 from its
 * storage), and the casts f32 -> i32 (toward zero) and i32 -> f32. They
 * read and write the words as integers: never as floats, whose arithmetic
 * the CPU backend runs with denormals flushed (a word 1 read as a float is
 * a denormal, -1 a NaN).
 * Every kernel honours the descriptors' offset, sizes and strides.
 * Built twice, with two tags, for "code of another bundle".
 *
 *===----------------------------------------------------------------------===*/

#include <stdint.h>

#ifndef GPIPE_TEST_KERNEL_TAG
#define GPIPE_TEST_KERNEL_TAG test
#endif
#define GPIPE_PASTE(a, b) a##b
#define GPIPE_NAME(index, tag) GPIPE_PASTE(gpipe_kernel_##index##_, tag)
#define GPIPE_KERNEL(index) GPIPE_NAME(index, GPIPE_TEST_KERNEL_TAG)

/* StridedMemRefType<float, 1> */
typedef struct {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} MemRef1D;

/* StridedMemRefType<float, 2> */
typedef struct {
  float *allocated;
  float *aligned;
  int64_t offset;
  int64_t sizes[2];
  int64_t strides[2];
} MemRef2D;

static float at(void *arg, int64_t i) {
  MemRef1D *m = (MemRef1D *)arg;
  return m->aligned[m->offset + i * m->strides[0]];
}

static void set(void *arg, int64_t i, float value) {
  MemRef1D *m = (MemRef1D *)arg;
  m->aligned[m->offset + i * m->strides[0]] = value;
}

static int64_t sizeOf(void *arg) { return ((MemRef1D *)arg)->sizes[0]; }

static float *at2(void *arg, int64_t i, int64_t j) {
  MemRef2D *m = (MemRef2D *)arg;
  return &m->aligned[m->offset + i * m->strides[0] + j * m->strides[1]];
}

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

/* add(in0,in1)->out, in0 [rows, cols] (dims 0, 1), in1 [cols] (dim 1):
 * in1 broadcast over the rows. */
void GPIPE_KERNEL(3)(void **args) {
  MemRef2D *out = (MemRef2D *)args[2];
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      *at2(out, i, j) = *at2(args[0], i, j) + at(args[1], j);
}

/* reduce_sum(in0, dim 1)->out: in0 [rows, cols] -> out [rows] (dim 0).
 * Each output element is zeroed, then the row added into it. */
void GPIPE_KERNEL(4)(void **args) {
  MemRef2D *in = (MemRef2D *)args[0];
  for (int64_t i = 0; i < in->sizes[0]; ++i) {
    set(args[1], i, 0.0f);
    for (int64_t j = 0; j < in->sizes[1]; ++j)
      set(args[1], i, at(args[1], i) + *at2(in, i, j));
  }
}

/* reduce_sum(in0, dim 0)->out: in0 [rows, cols] -> out [cols] (dim 1):
 * dimension 0 is reduced. The output is filled first, then each row added
 * in order. */
void GPIPE_KERNEL(5)(void **args) {
  MemRef2D *in = (MemRef2D *)args[0];
  for (int64_t j = 0; j < sizeOf(args[1]); ++j)
    set(args[1], j, 0.0f);
  for (int64_t i = 0; i < in->sizes[0]; ++i)
    for (int64_t j = 0; j < in->sizes[1]; ++j)
      set(args[1], j, at(args[1], j) + *at2(in, i, j));
}

/* reduce_sum(in0, dim 1)->t0; add(t0,in1)->out: in0 [rows, cols], in1 and
 * out [rows] (dim 0): the row sums plus in1, accumulated in the output. */
void GPIPE_KERNEL(6)(void **args) {
  MemRef2D *in = (MemRef2D *)args[0];
  for (int64_t i = 0; i < in->sizes[0]; ++i) {
    set(args[2], i, 0.0f);
    for (int64_t j = 0; j < in->sizes[1]; ++j)
      set(args[2], i, at(args[2], i) + *at2(in, i, j));
    set(args[2], i, at(args[2], i) + at(args[1], i));
  }
}

/* slice[dim=1, start=1, step=2](in0)->out over space [rows, 3]: in0 has a
 * fixed extent of 6 columns (its dims 0, 1, extents -1, 6); out [rows, 3]
 * takes its columns 1, 3 and 5. */
void GPIPE_KERNEL(7)(void **args) {
  MemRef2D *out = (MemRef2D *)args[1];
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      *at2(out, i, j) = *at2(args[0], i, 1 + 2 * j);
}

/* slice_grad[dim=1, start=1, step=2](in0)->out over space [rows, 3], the
 * window: in0 [rows, 3]; out has a fixed extent of 6 columns, in0's
 * columns at 1, 3 and 5 and 0 at 0, 2 and 4. Every output element is
 * written. */
void GPIPE_KERNEL(8)(void **args) {
  MemRef2D *out = (MemRef2D *)args[1];
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t c = 0; c < out->sizes[1]; ++c)
      *at2(out, i, c) = c % 2 == 1 ? *at2(args[0], i, (c - 1) / 2) : 0.0f;
}

/* concat[dim=1](in0,in1)->out over space [rows, 6]: in0 has a fixed extent
 * of 2 columns, in1 of 4; out [rows, 6] is in0's columns, then in1's. */
void GPIPE_KERNEL(9)(void **args) {
  MemRef2D *out = (MemRef2D *)args[2];
  for (int64_t i = 0; i < out->sizes[0]; ++i)
    for (int64_t j = 0; j < out->sizes[1]; ++j)
      *at2(out, i, j) = j < 2 ? *at2(args[0], i, j) : *at2(args[1], i, j - 2);
}

/* StridedMemRefType<int32_t, 1> */
typedef struct {
  int32_t *allocated;
  int32_t *aligned;
  int64_t offset;
  int64_t sizes[1];
  int64_t strides[1];
} MemRef1DI32;

static int32_t atI32(void *arg, int64_t i) {
  MemRef1DI32 *m = (MemRef1DI32 *)arg;
  return m->aligned[m->offset + i * m->strides[0]];
}

static void setI32(void *arg, int64_t i, int32_t value) {
  MemRef1DI32 *m = (MemRef1DI32 *)arg;
  m->aligned[m->offset + i * m->strides[0]] = value;
}

/* gt(in0, 0)->out: in0 f32, out i32, 1 where in0 > 0 (not for a NaN), else
 * 0. */
void GPIPE_KERNEL(10)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[1]); ++i)
    setI32(args[1], i, at(args[0], i) > 0.0f ? 1 : 0);
}

/* where(in0, in1, 0)->out: in0 an i32 mask (a word other than 0 is true),
 * in1 and out f32: in1 where the mask is true, else 0. */
void GPIPE_KERNEL(11)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[2]); ++i)
    set(args[2], i, atI32(args[0], i) != 0 ? at(args[1], i) : 0.0f);
}

/* cast_i32(in0)->out: in0 f32, out i32, toward zero (the tests keep in0
 * within i32's range). */
void GPIPE_KERNEL(12)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[1]); ++i)
    setI32(args[1], i, (int32_t)at(args[0], i));
}

/* cast_f32(in0)->out: in0 i32, out f32. */
void GPIPE_KERNEL(13)(void **args) {
  for (int64_t i = 0; i < sizeOf(args[1]); ++i)
    set(args[1], i, (float)atI32(args[0], i));
}
