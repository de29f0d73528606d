//===- ValidationText.h - Shapes and types in validation messages -*- C++
//-*-===//
//
// Private to runtime/src: how BundleValidation.cpp and StageValidation.cpp
// spell types and shapes in their messages.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_VALIDATIONTEXT_H
#define GPIPE_RUNTIME_SRC_VALIDATIONTEXT_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <cstdint>
#include <string>
#include <vector>

namespace gpipe::runtime::detail {

inline const char *typeName(ElementType type) {
  return type == ElementType::F32 ? "f32" : "i32";
}

inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

inline int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t dim : shape)
    n *= dim;
  return n;
}

/// The checks of one stage's programs (StageValidation.cpp): "" or "stage 1:
/// forward op 2 (dense): expects 2 or 3 operands, got 1".
std::string validateStage(const Bundle &bundle, unsigned stage);

/// The shapes of the ops over channels-last activations: conv2d, the pools,
/// global_avg_pool, flatten, batch_norm and their gradients
/// (ImageOpValidation.cpp), in `stage`'s program.
std::string checkImageOpShapes(const Op &op, const StageProgram &stage);

/// The shapes of attention and attention_grad, biases included
/// (AttentionValidation.cpp), in `stage`'s program.
std::string checkAttentionShapes(const Op &op, const StageProgram &stage);

/// The shapes of matmul (MatmulValidation.cpp), in `stage`'s program:
/// `backward` (the backward program, not its recompute) may contract the
/// batch.
std::string checkMatmulShapes(const Op &op, const StageProgram &stage,
                              bool backward);

/// The operands and result of a kernel op against its generated kernel in
/// `bundle.code` and its iteration space (KernelOpValidation.cpp), in
/// `stage`'s program.
std::string checkKernelShapes(const Op &op, const StageProgram &stage,
                              const Bundle &bundle);

} // namespace gpipe::runtime::detail

#endif // GPIPE_RUNTIME_SRC_VALIDATIONTEXT_H
