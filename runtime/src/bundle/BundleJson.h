//===- BundleJson.h - The bundle's JSON, for its reader and writer -*- C++
//-*-===//
//
// Private to runtime/src: the names the bundle format spells (instruction
// kinds and their keys, initializers, remat policies, element types), the
// helpers that put a JSON location and value into a message, and the
// reader's class, whose typed field getters are in BundleJson.cpp and whose
// sections are in BundleReader.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef GPIPE_RUNTIME_SRC_BUNDLEJSON_H
#define GPIPE_RUNTIME_SRC_BUNDLEJSON_H

#include "gpipe/runtime/bundle/Bundle.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpipe::runtime::bundlejson {

/// Ordered, so that errors follow the document's key order and the writer
/// keeps the documented key order.
using Json = nlohmann::ordered_json;

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

/// The instruction kinds, with the keys each takes besides `op`.
enum InstrField : unsigned {
  NoFields = 0,
  NameField = 1,     ///< name
  StageField = 2,    ///< stage
  MbField = 4,       ///< mb
  PeerField = 8,     ///< peer
  ChannelField = 16, ///< channel
  /// stage, written only when devices run several stages (interleaving);
  /// absent, the device's one stage
  ServedStageField = 32
};

struct InstrInfo {
  InstrKind kind;
  const char *name;
  unsigned fields;
};

inline constexpr unsigned kTransferFields =
    ServedStageField | PeerField | MbField | ChannelField;
inline constexpr InstrInfo kInstrs[] = {
    {InstrKind::LoadInput, "load_input",
     ServedStageField | NameField | MbField},
    {InstrKind::Forward, "forward", StageField | MbField},
    {InstrKind::Backward, "backward", StageField | MbField},
    {InstrKind::BackwardWeights, "backward_weights", StageField | MbField},
    {InstrKind::SendActivation, "send_activation", kTransferFields},
    {InstrKind::RecvActivation, "recv_activation", kTransferFields},
    {InstrKind::SendGradient, "send_gradient", kTransferFields},
    {InstrKind::RecvGradient, "recv_gradient", kTransferFields},
    {InstrKind::WaitSendActivation, "wait_send_activation", kTransferFields},
    {InstrKind::WaitSendGradient, "wait_send_gradient", kTransferFields},
    {InstrKind::OptimizerStep, "optimizer_step", NoFields},
};

inline const InstrInfo &instrInfo(InstrKind kind) {
  for (const InstrInfo &info : kInstrs)
    if (info.kind == kind)
      return info;
  return kInstrs[0]; // unreachable for a valid InstrKind
}

inline constexpr std::pair<InitKind, const char *> kInits[] = {
    {InitKind::Zeros, "zeros"},
    {InitKind::Ones, "ones"},
    {InitKind::Normal, "normal"},
    {InitKind::Uniform, "uniform"},
    {InitKind::GlorotUniform, "glorot_uniform"},
    {InitKind::Pretrained, "pretrained"},
};

inline constexpr std::pair<RematPolicy, const char *> kRemats[] = {
    {RematPolicy::None, "none"},
    {RematPolicy::Full, "full"},
    {RematPolicy::ExceptLast, "except-last"},
    {RematPolicy::Selective, "selective"},
};

inline constexpr std::pair<ElementType, const char *> kTypes[] = {
    {ElementType::F32, "f32"},
    {ElementType::I32, "i32"},
};

template <typename T, size_t N>
inline const char *nameIn(const std::pair<T, const char *> (&table)[N],
                          T value) {
  for (const auto &entry : table)
    if (entry.first == value)
      return entry.second;
  return "unknown";
}

template <typename T, size_t N>
inline std::string namesOf(const std::pair<T, const char *> (&table)[N]) {
  std::string text;
  for (const auto &entry : table)
    text += (text.empty() ? "" : ", ") + std::string(entry.second);
  return text;
}

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//

std::string dumpJson(const Json &value);
std::string describe(const Json &value);
std::string shortText(const Json &value);
std::string plural(size_t count, const char *noun,
                   const char *pluralNoun = nullptr);
std::string keyPath(const std::string &path, const char *key);
std::string indexPath(const std::string &path, size_t index);
std::string quotedList(const std::set<std::string> &names);

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

/// What a stage's ops may reference.
struct StageContext {
  unsigned index;
  size_t numValues;
};

class Reader {
public:
  explicit Reader(const std::string &source) : source(source) {}

  bool read(const Json &root, std::string_view text, Bundle &bundle);
  bool verifyChecksum(const Json &root, std::string_view text);
  bool readPlacement(const Json &json, const std::string &path,
                     const std::vector<Instr> &program, int64_t numValues,
                     PlannedDeviceMemory &device);

  std::string error;

private:
  bool fail(const std::string &path, const std::string &message) {
    error = "'" + source + "': " + (path.empty() ? "" : path + ": ") + message;
    return false;
  }

  // Structure.
  bool expectObject(const Json &value, const std::string &path);
  bool checkKeys(const Json &object, const std::string &path,
                 const std::vector<const char *> &allowed,
                 const std::string &owner = "");
  /// The value of `key`, or nullptr (an error if `required`).
  bool lookup(const Json &object, const std::string &path, const char *key,
              bool required, const Json *&out);

  // Typed fields; an absent optional field leaves `out` as it is.
  bool getString(const Json &object, const std::string &path, const char *key,
                 std::string &out, bool required = true);
  bool getBool(const Json &object, const std::string &path, const char *key,
               bool &out, bool required = true);
  bool getNumber(const Json &object, const std::string &path, const char *key,
                 double &out, bool required = true);
  bool getFloat(const Json &object, const std::string &path, const char *key,
                float &out, bool required = true);
  bool getInt(const Json &object, const std::string &path, const char *key,
              int64_t &out, bool required = true);
  /// A non-negative integer that fits in `unsigned`.
  bool getIndex(const Json &object, const std::string &path, const char *key,
                unsigned &out, bool required = true);
  /// A 64-bit seed: [0, 2^64), or a negative 64-bit integer read as its two's
  /// complement (as writers with only signed 64-bit integers emit it).
  bool getSeed(const Json &object, const std::string &path, const char *key,
               uint64_t &out, bool required = true);
  bool getIntArray(const Json &object, const std::string &path, const char *key,
                   std::vector<int64_t> &out, bool required = true);
  bool getArray(const Json &object, const std::string &path, const char *key,
                const Json *&out);
  bool integerValue(const Json &value, const std::string &path,
                    const std::string &what, int64_t &out);

  // Sections.
  bool readModelInputs(const Json &root, Bundle &bundle);
  bool readParams(const Json &root, size_t numStages, Bundle &bundle);
  bool readStage(const Json &json, const std::string &path, unsigned index,
                 StageProgram &stage);
  bool readValueRef(const Json &object, const std::string &path,
                    const char *key, const StageContext &context,
                    const char *what, int &out);
  bool readValueList(const Json &object, const std::string &path,
                     const char *key, const StageContext &context,
                     std::vector<int> &out);
  bool readOps(const Json &object, const std::string &path, const char *key,
               const StageContext &context, std::vector<Op> &out);
  /// A [rows, columns] attribute of values >= minimum; absent keeps `out`.
  bool readPair(const Json &json, const std::string &path, const char *key,
                int64_t minimum, int64_t (&out)[2]);
  bool readOp(const Json &json, const std::string &path,
              const StageContext &context, Op &op);
  bool readMemoryPlan(const Json &root, Bundle &bundle);
  /// The optional `code` section (BundleCodeReader.cpp); read before the
  /// stages, whose kernel ops it checks.
  bool readCode(const Json &root, GeneratedCode &code);
  bool readKernelOp(const Json &json, const std::string &path, Op &op);
  /// A kernel's rank and dimensions (`code.kernels[i]`, `at`).
  bool readKernelDims(const Json &item, const std::string &at,
                      GeneratedKernelSpec &spec);
  /// A kernel's optional `extents` (integers; their counts and values are
  /// checkKernelDims's).
  bool readExtents(const Json &item, const std::string &at,
                   GeneratedKernelSpec &spec);
  /// A kernel's optional `types`: one element type name per memref.
  bool readTypes(const Json &item, const std::string &at,
                 GeneratedKernelSpec &spec);
  /// A kernel's optional `indexBounds`: one per input, 0 or the extent of
  /// the axis an i32 input indexes (after `types`).
  bool readIndexBounds(const Json &item, const std::string &at,
                       GeneratedKernelSpec &spec);
  /// One list of dimensions, `name` in the object at `path`: integers in
  /// [0, rank) (their order is checkKernelDims's).
  bool readDims(const Json &value, const std::string &path,
                const std::string &name, unsigned rank,
                std::vector<unsigned> &out);
  bool readProgram(const Json &json, const std::string &path, unsigned device,
                   const Bundle &bundle, std::vector<Instr> &out);
  bool readInstr(const Json &json, const std::string &path, unsigned device,
                 const Bundle &bundle, Instr &instr);

  std::string source;
  std::set<std::string> modelInputs;
  std::set<std::string> paramNames;
  const GeneratedCode *code = nullptr; ///< once read, for the kernel ops
};

} // namespace gpipe::runtime::bundlejson

#endif // GPIPE_RUNTIME_SRC_BUNDLEJSON_H
