//===- BundleCodeReader.cpp - Reads a bundle's generated code -------------===//
//
// The optional `code` section: the generated kernels (symbol, input count,
// what they compute, their iteration dimensions: which each input has and
// which the output keeps, the memrefs' fixed extents and element types) and
// their native code per x86-64 level, decoded
// from base64, and as PTX for CUDA (code.cuda); and the `kernel` ops that
// run them (with their iteration space). Only the bytes are read here:
// whether they are a loadable shared object is the loader's question
// (backends/GeneratedCode.h), asked where the code would run. The rest of
// the bundle is read by BundleReader.cpp.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"
#include "gpipe/runtime/bundle/Base64.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

/// "[0, 2]" (as the bundle's JSON writes it).
static std::string dimsText(const std::vector<unsigned> &dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? ", " : "") + std::to_string(dims[i]);
  return text + "]";
}

/// Whether `dims` ascend strictly within [0, rank).
static bool ascendingBelow(const std::vector<unsigned> &dims, unsigned rank) {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] >= rank || (i > 0 && dims[i] <= dims[i - 1]))
      return false;
  return true;
}

/// Distinct dimensions below `rank`, in any order: an input's own order of
/// the iteration dimensions (a transposed input's are not ascending).
static bool distinctBelow(std::vector<unsigned> dims, unsigned rank) {
  std::sort(dims.begin(), dims.end());
  return ascendingBelow(dims, rank);
}

/// "[-1, 4]" (as the bundle's JSON writes it).
static std::string extentsText(const std::vector<int64_t> &extents) {
  std::string text = "[";
  for (size_t i = 0; i < extents.size(); ++i)
    text += (i ? ", " : "") + std::to_string(extents[i]);
  return text + "]";
}

/// The extents of a kernel whose dimensions are checked: none, or one list
/// per memref with one entry per dimension of it, each -1 or a size >= 1,
/// -1 on iteration dimension 0 and throughout a reducing kernel's output.
static std::string checkKernelExtents(const GeneratedKernelSpec &kernel) {
  const std::vector<std::vector<int64_t>> &extents = kernel.extents;
  if (extents.empty())
    return {};
  const size_t memrefs = size_t(kernel.inputs) + 1;
  if (extents.size() != memrefs)
    return "expected 'extents' with " + std::to_string(memrefs) +
           " lists (one per input, then the output), found " +
           std::to_string(extents.size());
  for (size_t m = 0; m < memrefs; ++m) {
    const bool output = m == kernel.inputs;
    const std::vector<unsigned> &dims =
        output ? kernel.outputDims : kernel.inputDims[m];
    const std::string name = "'extents[" + std::to_string(m) + "]";
    if (extents[m].size() != dims.size())
      return "expected " + name + "' with " + std::to_string(dims.size()) +
             (dims.size() == 1 ? " entry" : " entries") +
             " (one per dimension of " +
             (output ? std::string("'outputDims'")
                     : "'inputDims[" + std::to_string(m) + "]'") +
             "), found " + std::to_string(extents[m].size());
    for (size_t i = 0; i < dims.size(); ++i) {
      const int64_t extent = extents[m][i];
      const std::string entry = name + "[" + std::to_string(i) + "]'";
      if (extent != -1 && extent < 1)
        return "expected " + entry + " as -1 or a size >= 1, found " +
               std::to_string(extent);
      if (extent != -1 && dims[i] == 0)
        return "expected -1 for " + entry +
               ": it is iteration dimension 0, which scales with the "
               "micro-batch";
    }
  }
  const std::vector<int64_t> &output = extents.back();
  if (kernel.reduces() &&
      std::any_of(output.begin(), output.end(),
                  [](int64_t extent) { return extent != -1; }))
    return "expected only -1 in 'extents[" + std::to_string(kernel.inputs) +
           "]' (the output's) of a kernel that reduces ('outputDims' " +
           dimsText(kernel.outputDims) + " of rank " +
           std::to_string(kernel.rank) + "), found " + extentsText(output);
  return {};
}

/// 'types' of another length than the kernel's memrefs.
static std::string typesCountError(size_t memrefs, size_t found) {
  return "expected 'types' with " + std::to_string(memrefs) +
         " entries (one per input, then the output), found " +
         std::to_string(found);
}

std::string gpipe::runtime::checkKernelDims(const GeneratedKernelSpec &kernel) {
  const unsigned rank = kernel.rank;
  if (rank < 1 || rank > kMaxKernelRank)
    return "expected 'rank' from 1 to " + std::to_string(kMaxKernelRank) +
           ", found " + std::to_string(rank);
  const std::string within = "strictly ascending dimensions in [0, " +
                             std::to_string(rank) + "), found ";
  const std::string distinct = "distinct dimensions in [0, " +
                               std::to_string(rank) + "), found ";
  if (kernel.inputDims.size() != kernel.inputs)
    return "expected 'inputDims' with " + std::to_string(kernel.inputs) +
           " entr" + (kernel.inputs == 1 ? "y" : "ies") +
           " (one per input), found " + std::to_string(kernel.inputDims.size());
  for (size_t k = 0; k < kernel.inputDims.size(); ++k)
    if (!distinctBelow(kernel.inputDims[k], rank))
      return "expected 'inputDims[" + std::to_string(k) + "]' as " + distinct +
             dimsText(kernel.inputDims[k]);
  if (!ascendingBelow(kernel.outputDims, rank))
    return "expected 'outputDims' as " + within + dimsText(kernel.outputDims);
  for (unsigned d = 0; d < rank; ++d) {
    bool reduced = true, read = false;
    for (unsigned o : kernel.outputDims)
      reduced &= o != d;
    for (const std::vector<unsigned> &dims : kernel.inputDims)
      for (unsigned i : dims)
        read |= i == d;
    if (reduced && !read)
      return "dimension " + std::to_string(d) + " is reduced ('outputDims' " +
             dimsText(kernel.outputDims) +
             " lacks it) but no input has it; expected each reduced "
             "dimension in some 'inputDims'";
  }
  if (std::string error = checkKernelExtents(kernel); !error.empty())
    return error;
  // Types: none (all f32), or one per memref. Each is an ElementType, f32 or
  // i32, by construction (the reader refuses any other name).
  const size_t memrefs = size_t(kernel.inputs) + 1;
  if (!kernel.types.empty() && kernel.types.size() != memrefs)
    return typesCountError(memrefs, kernel.types.size());
  return {};
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
  const Json *kernels, *cpu, *cuda;
  if (!expectObject(*json, path) ||
      !checkKeys(*json, path, {"kernels", "cpu", "cuda"}) ||
      !getArray(*json, path, "kernels", kernels) ||
      !getArray(*json, path, "cpu", cpu) ||
      !lookup(*json, path, "cuda", false, cuda))
    return false;

  out.kernels.assign(kernels->size(), GeneratedKernelSpec());
  std::map<std::string, size_t> symbols;
  for (size_t i = 0; i < kernels->size(); ++i) {
    const Json &item = (*kernels)[i];
    const std::string at = indexPath("code.kernels", i);
    GeneratedKernelSpec &spec = out.kernels[i];
    if (!expectObject(item, at) ||
        !checkKeys(item, at,
                   {"symbol", "inputs", "ops", "rank", "inputDims",
                    "outputDims", "extents", "types", "indexBounds"}) ||
        !getString(item, at, "symbol", spec.symbol) ||
        !getIndex(item, at, "inputs", spec.inputs) ||
        !getString(item, at, "ops", spec.ops) ||
        !getIndex(item, at, "rank", spec.rank))
      return false;
    if (!isIdentifier(spec.symbol))
      return fail(at, "expected a C identifier 'symbol', found " +
                          shortText(item.at("symbol")));
    if (spec.inputs < 1 || spec.inputs > kMaxKernelInputs)
      return fail(at, "expected 'inputs' from 1 to " +
                          std::to_string(kMaxKernelInputs) + ", found " +
                          std::to_string(spec.inputs));
    if (!readKernelDims(item, at, spec))
      return false;
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
  // "cuda": the kernels as PTX (the compiler's --gpipe-ptx), which the CUDA
  // backend loads (cuModuleLoadData); whether the driver takes it is asked
  // there, on the GPU.
  if (cuda) {
    const std::string at = "code.cuda";
    CudaCode code;
    if (!expectObject(*cuda, at) || !checkKeys(*cuda, at, {"arch", "ptx"}) ||
        !getString(*cuda, at, "arch", code.arch) ||
        !getString(*cuda, at, "ptx", code.ptx))
      return false;
    std::string error = checkCudaCode(code, out.kernels);
    if (!error.empty())
      return fail(at, error);
    out.cuda = std::move(code);
  }
  return true;
}

bool gpipe::runtime::isCudaArch(const std::string &arch) {
  if (arch.size() <= 3 || arch.compare(0, 3, "sm_") != 0)
    return false;
  for (size_t i = 3; i < arch.size(); ++i)
    if (arch[i] < '0' || arch[i] > '9')
      return false;
  return true;
}

bool gpipe::runtime::ptxHasEntry(const std::string &ptx,
                                 const std::string &symbol) {
  auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  };
  const std::string entry = ".entry";
  for (size_t at = ptx.find(entry); at != std::string::npos;
       at = ptx.find(entry, at + 1)) {
    // ".entry" as a word: not the tail of another directive or name.
    if (at > 0 && !space(ptx[at - 1]))
      continue;
    size_t i = at + entry.size();
    if (i >= ptx.size() || !space(ptx[i]))
      continue;
    while (i < ptx.size() && space(ptx[i]))
      ++i;
    if (ptx.compare(i, symbol.size(), symbol) != 0)
      continue;
    const size_t end = i + symbol.size();
    if (end == ptx.size() || ptx[end] == '(' || space(ptx[end]))
      return true;
  }
  return false;
}

std::string
gpipe::runtime::checkCudaCode(const CudaCode &cuda,
                              const std::vector<GeneratedKernelSpec> &kernels) {
  if (!isCudaArch(cuda.arch))
    return "expected 'arch' as sm_ and digits (\"sm_90\"), found '" +
           cuda.arch.substr(0, 40) + (cuda.arch.size() > 40 ? "…" : "") + "'";
  if (cuda.ptx.empty())
    return "expected the kernels' PTX text ('ptx'), found an empty string";
  for (size_t k = 0; k < kernels.size(); ++k)
    if (!ptxHasEntry(cuda.ptx, kernels[k].symbol))
      return "expected 'ptx' with an '.entry " + kernels[k].symbol +
             "' for kernel " + std::to_string(k) + " (" + kernels[k].ops +
             "), found none: built for another bundle?";
  return {};
}

/// "[8, 6]" (as the bundle's JSON writes it).
static std::string intsText(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

bool Reader::readDims(const Json &value, const std::string &path,
                      const std::string &name, unsigned rank,
                      std::vector<unsigned> &out) {
  if (!value.is_array())
    return fail(path,
                "expected an array '" + name + "', found " + describe(value));
  std::vector<int64_t> dims(value.size(), 0);
  for (size_t j = 0; j < value.size(); ++j)
    if (!integerValue(value[j], indexPath(path + "." + name, j),
                      "a dimension (an integer)", dims[j]))
      return false;
  out.assign(dims.size(), 0);
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j] < 0 || dims[j] >= int64_t(rank))
      return fail(path, "expected '" + name + "' as dimensions in [0, " +
                            std::to_string(rank) + "), found " +
                            intsText(dims));
    out[j] = unsigned(dims[j]);
  }
  return true;
}

bool Reader::readKernelDims(const Json &item, const std::string &at,
                            GeneratedKernelSpec &spec) {
  if (spec.rank < 1 || spec.rank > kMaxKernelRank)
    return fail(at, "expected 'rank' from 1 to " +
                        std::to_string(kMaxKernelRank) + ", found " +
                        std::to_string(spec.rank));
  const Json *inputDims, *outputDims;
  if (!getArray(item, at, "inputDims", inputDims) ||
      !lookup(item, at, "outputDims", true, outputDims))
    return false;
  if (inputDims->size() != spec.inputs)
    return fail(at, "expected 'inputDims' with " +
                        plural(spec.inputs, "entry", "entries") +
                        " (one per input), found " +
                        std::to_string(inputDims->size()));
  spec.inputDims.assign(inputDims->size(), {});
  for (size_t k = 0; k < inputDims->size(); ++k)
    if (!readDims((*inputDims)[k], at, indexPath("inputDims", k), spec.rank,
                  spec.inputDims[k]))
      return false;
  if (!readDims(*outputDims, at, "outputDims", spec.rank, spec.outputDims))
    return false;
  if (!readExtents(item, at, spec) || !readTypes(item, at, spec) ||
      !readIndexBounds(item, at, spec))
    return false;
  // In range: what is left is the order and the reduced dimensions, and
  // the extents' counts and values.
  std::string error = checkKernelDims(spec);
  return error.empty() || fail(at, error);
}

bool Reader::readExtents(const Json &item, const std::string &at,
                         GeneratedKernelSpec &spec) {
  const Json *extents;
  if (!lookup(item, at, "extents", false, extents))
    return false;
  if (!extents)
    return true;
  if (!extents->is_array())
    return fail(at, "expected an array 'extents', found " + describe(*extents));
  // Counted here too: an empty array would read as no extents at all.
  if (extents->size() != size_t(spec.inputs) + 1)
    return fail(at, "expected 'extents' with " +
                        std::to_string(spec.inputs + 1) +
                        " lists (one per input, then the output), found " +
                        std::to_string(extents->size()));
  spec.extents.assign(extents->size(), {});
  for (size_t m = 0; m < extents->size(); ++m) {
    const Json &list = (*extents)[m];
    const std::string name = indexPath("extents", m);
    if (!list.is_array())
      return fail(at,
                  "expected an array '" + name + "', found " + describe(list));
    spec.extents[m].assign(list.size(), 0);
    for (size_t i = 0; i < list.size(); ++i)
      if (!integerValue(list[i], indexPath(at + "." + name, i),
                        "a size (an integer)", spec.extents[m][i]))
        return false;
  }
  return true;
}

bool Reader::readTypes(const Json &item, const std::string &at,
                       GeneratedKernelSpec &spec) {
  const Json *types;
  if (!lookup(item, at, "types", false, types))
    return false;
  if (!types)
    return true;
  if (!types->is_array())
    return fail(at, "expected an array 'types', found " + describe(*types));
  // Counted here: an empty array would read as no types at all (all f32).
  const size_t memrefs = size_t(spec.inputs) + 1;
  if (types->size() != memrefs)
    return fail(at, typesCountError(memrefs, types->size()));
  spec.types.assign(memrefs, ElementType::F32);
  for (size_t m = 0; m < memrefs; ++m) {
    const Json &type = (*types)[m];
    bool known = false;
    for (const auto &[value, name] : kTypes)
      if (type.is_string() && type.get<std::string>() == name) {
        spec.types[m] = value;
        known = true;
      }
    if (!known)
      return fail(at,
                  "expected '" + indexPath("types", m) +
                      "' as \"f32\" or \"i32\", found " +
                      (type.is_string() ? shortText(type) : describe(type)));
  }
  return true;
}

bool Reader::readIndexBounds(const Json &item, const std::string &at,
                             GeneratedKernelSpec &spec) {
  const Json *bounds;
  if (!lookup(item, at, "indexBounds", false, bounds))
    return false;
  if (!bounds)
    return true;
  if (!bounds->is_array())
    return fail(at, "expected an array 'indexBounds', found " +
                        describe(*bounds));
  if (bounds->size() != spec.inputs)
    return fail(at, "expected 'indexBounds' with " +
                        plural(spec.inputs, "entry", "entries") +
                        " (one per input), found " +
                        std::to_string(bounds->size()));
  spec.indexBounds.assign(spec.inputs, 0);
  for (size_t k = 0; k < spec.inputs; ++k) {
    const std::string name = indexPath("indexBounds", k);
    if (!integerValue((*bounds)[k], indexPath(at + "." + "indexBounds", k),
                      "a bound (an integer)", spec.indexBounds[k]))
      return false;
    if (spec.indexBounds[k] < 0)
      return fail(at, "expected '" + name + "' as 0 or an axis's extent >= 1, "
                      "found " + std::to_string(spec.indexBounds[k]));
    if (spec.indexBounds[k] > 0 && spec.typeOf(k) != ElementType::I32)
      return fail(at, "expected '" + name + "' as 0: input " +
                          std::to_string(k) +
                          " is f32, and only i32 inputs hold indices");
  }
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
  // The sizes at the full batch; validateBundle matches them with the
  // operands' shapes and the batch.
  if (!getIntArray(json, path, "space", op.space) ||
      !getBool(json, path, "batched", op.spaceBatched))
    return false;
  if (op.space.size() != spec.rank)
    return fail(path, "kernel " + std::to_string(index) + " (" + spec.ops +
                          ") has rank " + std::to_string(spec.rank) +
                          ": expected 'space' with " +
                          plural(spec.rank, "size") + ", found " +
                          intsText(op.space));
  for (int64_t size : op.space)
    if (size < 1)
      return fail(path,
                  "expected 'space' sizes >= 1, found " + intsText(op.space));
  return true;
}
