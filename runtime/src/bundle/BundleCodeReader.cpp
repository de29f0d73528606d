//===- BundleCodeReader.cpp - Reads a bundle's generated code -------------===//
//
// The optional `code` section: the generated kernels (symbol, input count,
// what they compute) and their native code per x86-64 level, decoded from
// base64; and the `kernel` ops that run them. Only the bytes are read here:
// whether they are a loadable shared object is the loader's question
// (backends/GeneratedCode.h), asked where the code would run. The rest of
// the bundle is read by BundleReader.cpp.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"
#include "gpipe/runtime/bundle/Base64.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>

using namespace gpipe::runtime;
using namespace gpipe::runtime::bundlejson;

/// A C identifier: what dlsym can name, and nothing a path could hide in.
static bool isIdentifier(const std::string &name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (char c : name)
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9')))
      return false;
  return true;
}

static std::string isaNames() {
  std::string names;
  for (const char *isa : kCpuCodeIsas)
    names += (names.empty() ? "" : ", ") + std::string(isa);
  return names;
}

bool Reader::readCode(const Json &root, GeneratedCode &out) {
  code = &out;
  const Json *json;
  if (!lookup(root, "", "code", false, json))
    return false;
  if (!json)
    return true;
  const std::string path = "code";
  const Json *kernels, *cpu;
  if (!expectObject(*json, path) ||
      !checkKeys(*json, path, {"kernels", "cpu"}) ||
      !getArray(*json, path, "kernels", kernels) ||
      !getArray(*json, path, "cpu", cpu))
    return false;

  out.kernels.assign(kernels->size(), GeneratedKernelSpec());
  std::map<std::string, size_t> symbols;
  for (size_t i = 0; i < kernels->size(); ++i) {
    const Json &item = (*kernels)[i];
    const std::string at = indexPath("code.kernels", i);
    GeneratedKernelSpec &spec = out.kernels[i];
    if (!expectObject(item, at) ||
        !checkKeys(item, at, {"symbol", "inputs", "ops"}) ||
        !getString(item, at, "symbol", spec.symbol) ||
        !getIndex(item, at, "inputs", spec.inputs) ||
        !getString(item, at, "ops", spec.ops))
      return false;
    if (!isIdentifier(spec.symbol))
      return fail(at, "expected a C identifier 'symbol', found " +
                          shortText(item.at("symbol")));
    if (spec.inputs < 1 || spec.inputs > kMaxKernelInputs)
      return fail(at, "expected 'inputs' from 1 to " +
                          std::to_string(kMaxKernelInputs) + ", found " +
                          std::to_string(spec.inputs));
    auto [it, fresh] = symbols.emplace(spec.symbol, i);
    if (!fresh)
      return fail(at, "kernel '" + spec.symbol + "' is declared twice (also " +
                          indexPath("code.kernels", it->second) + ")");
  }

  out.cpu.assign(cpu->size(), CodeVariant());
  std::map<std::string, size_t> isas;
  for (size_t i = 0; i < cpu->size(); ++i) {
    const Json &item = (*cpu)[i];
    const std::string at = indexPath("code.cpu", i);
    CodeVariant &variant = out.cpu[i];
    std::string text;
    if (!expectObject(item, at) || !checkKeys(item, at, {"isa", "elf"}) ||
        !getString(item, at, "isa", variant.isa) ||
        !getString(item, at, "elf", text))
      return false;
    bool known = false;
    for (const char *isa : kCpuCodeIsas)
      known |= variant.isa == isa;
    if (!known)
      return fail(at, "unknown isa '" + variant.isa + "'; expected one of " +
                          isaNames());
    auto [it, fresh] = isas.emplace(variant.isa, i);
    if (!fresh)
      return fail(at, "a second code variant for " + variant.isa + " (also " +
                          indexPath("code.cpu", it->second) + ")");
    std::string error;
    if (!decodeBase64(text, variant.bytes, error))
      return fail(at,
                  "the " + variant.isa +
                      " code artifact ('elf') is not valid base64: " + error);
    if (variant.bytes.empty())
      return fail(at, "the " + variant.isa + " code artifact ('elf') is empty");
  }
  if (!out.kernels.empty() && out.cpu.empty())
    return fail(path, "expected a CPU code variant ('cpu') for the " +
                          plural(out.kernels.size(), "generated kernel") +
                          ", found none");
  return true;
}

bool Reader::readKernelOp(const Json &json, const std::string &path, Op &op) {
  unsigned index = 0;
  if (!getIndex(json, path, "kernel", index))
    return false;
  const size_t count = code ? code->kernels.size() : 0;
  if (index >= count)
    return fail(path, "kernel " + std::to_string(index) +
                          " out of range: the bundle has " +
                          plural(count, "generated kernel") +
                          (count == 0 ? " (no 'code' section)" : ""));
  const GeneratedKernelSpec &spec = code->kernels[index];
  if (op.operands.size() != spec.inputs)
    return fail(path, "kernel " + std::to_string(index) + " (" + spec.ops +
                          ") takes " + plural(spec.inputs, "input") +
                          ", found " + plural(op.operands.size(), "operand"));
  op.kernel = int(index);
  return true;
}
