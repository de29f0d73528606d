//===- ModelName.h - What a generated model may be called -------*- C++ -*-===//

#ifndef GPIPE_MODELS_MODELNAME_H
#define GPIPE_MODELS_MODELNAME_H

#include <cctype>
#include <string>

namespace gpipe {

/// "" if `name` can be a gpipe.model's symbol as the builders write it (a
/// bare MLIR identifier), else what is wrong.
inline std::string validateModelName(const std::string &name) {
  bool ok =
      !name.empty() &&
      (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_');
  for (char c : name)
    ok &= std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
          c == '$';
  if (ok)
    return {};
  return "expects a model name of letters, digits, '_', '.' and '$' starting "
         "with a letter or '_', got '" +
         name + "'";
}

} // namespace gpipe

#endif // GPIPE_MODELS_MODELNAME_H
