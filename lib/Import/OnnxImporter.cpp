//===- OnnxImporter.cpp - ONNX models as gpipe models ---------------------===//
//
// The driver: parse, opset and op checks, ONNX's checker, then the model's
// text: inputs, one `gpipe.layer` per run of nodes with the same name scope
// (OnnxOps.cpp converts each node), the loss, `gpipe.return`; ONNX's shape
// inference last, as a cross-check.
// Values that later layers use leave their layer as its results.
//
//===----------------------------------------------------------------------===//

#include "OnnxGraph.h"

#include "gpipe/Models/ModelName.h"

#include <onnx/checker.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <map>
#include <cstring>
#include <sstream>

using namespace gpipe;
using namespace gpipe::onnx_import;

std::string gpipe::onnx_import::shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string gpipe::onnx_import::tensorType(const std::vector<int64_t> &shape,
                                           bool isFloat) {
  std::string text = "tensor<";
  for (int64_t dim : shape)
    text += std::to_string(dim) + "x";
  return text + (isFloat ? "f32>" : "i32>");
}

namespace {

/// The newest opset of the default domain, and IR version, the importer
/// reads: what PyTorch's dynamo exporter writes (opsets 18 to 21 take the
/// axes of the reductions, Split's parts and Pad's axes as inputs or new
/// attributes, which the conversions read by opset).
constexpr int64_t kNewestOpset = 21;
constexpr int64_t kNewestIrVersion = 10;

/// The module path the dynamo exporter records on `node`: its metadata
/// entry `pkg.torch.onnx.name_scopes`, a Python list of full dotted paths
/// (['', 'hf', 'hf.model', 'hf.model.layers.0', 'mul_3']), each made
/// relative to the one before (hf, model, layers.0, mul_3). NodeProto's
/// metadata_props (field 9, IR 10) is newer than libonnx 1.12, which keeps
/// it as an unknown field.
std::vector<std::string> torchNameScopes(const onnx::NodeProto &node) {
  const google::protobuf::UnknownFieldSet &unknown = node.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField &field = unknown.field(i);
    if (field.number() != 9 ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (!entry.ParseFromString(field.length_delimited()) ||
        entry.key() != "pkg.torch.onnx.name_scopes")
      continue;
    std::vector<std::string> paths;
    const std::string &text = entry.value();
    for (size_t open = text.find('\''); open != std::string::npos;) {
      size_t close = text.find('\'', open + 1);
      if (close == std::string::npos)
        break;
      paths.push_back(text.substr(open + 1, close - open - 1));
      open = text.find('\'', close + 1);
    }
    std::vector<std::string> parts;
    std::string previous;
    for (const std::string &path : paths) {
      if (path.empty())
        continue;
      std::string part = path;
      if (!previous.empty() && path.rfind(previous + ".", 0) == 0)
        part = path.substr(previous.size() + 1);
      parts.push_back(part);
      previous = path;
    }
    return parts;
  }
  return {};
}

/// The node's name components: its '/'-separated name (the TorchScript
/// exporter's /scope/.../Op), or the dynamo exporter's name scopes; the last
/// is the op's own name.
std::vector<std::string> nameParts(const onnx::NodeProto &node) {
  std::vector<std::string> parts;
  std::stringstream name(node.name());
  for (std::string part; std::getline(name, part, '/');)
    if (!part.empty())
      parts.push_back(part);
  if (parts.size() < 2) {
    std::vector<std::string> scopes = torchNameScopes(node);
    if (scopes.size() >= 2)
      return scopes;
  }
  return parts;
}

/// The node's layer key: its first `depth` name-scope components.
std::string scopeOf(const onnx::NodeProto &node, unsigned depth) {
  std::vector<std::string> parts = nameParts(node);
  if (parts.size() < 2 || depth == 0)
    return {};      // no scope: the node alone
  parts.pop_back(); // the op's own name
  parts.resize(std::min<size_t>(parts.size(), depth));
  std::string key;
  for (const std::string &part : parts)
    key += (key.empty() ? "" : "/") + part;
  return key;
}

/// The scope components of `node`'s name (its own name dropped).
std::vector<std::string> scopeParts(const onnx::NodeProto &node) {
  std::vector<std::string> parts = nameParts(node);
  if (!parts.empty())
    parts.pop_back();
  return parts;
}

/// Whether a scope component names one of a model's repeated blocks: a
/// number, or a name ending in one after a dot (`h.0`, `layer.11`,
/// `features.3`, `layer1.0`).
bool isNumberedBlock(const std::string &part) {
  size_t dot = part.rfind('.');
  std::string tail = dot == std::string::npos ? part : part.substr(dot + 1);
  return !tail.empty() && std::all_of(tail.begin(), tail.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

/// The scope depth of `graph`'s repeated blocks: the most common depth at
/// which a node's first numbered component sits; 1 where none is.
unsigned blockDepth(const onnx::GraphProto &graph) {
  std::map<size_t, size_t> votes;
  for (const onnx::NodeProto &node : graph.node()) {
    std::vector<std::string> parts = scopeParts(node);
    for (size_t i = 0; i < parts.size(); ++i)
      if (isNumberedBlock(parts[i])) {
        ++votes[i + 1];
        break;
      }
  }
  size_t best = 1, most = 0;
  for (const auto &[depth, count] : votes)
    if (count > most) {
      best = depth;
      most = count;
    }
  return unsigned(best);
}

std::string lowercase(std::string text) {
  for (char &c : text)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

} // namespace

GraphImporter::GraphImporter(const onnx::ModelProto &model,
                             const OnnxImportOptions &options,
                             OnnxImport &result)
    : options(options), model(model), graph(model.graph()), result(result) {}

std::string GraphImporter::readConstants() {
  for (const onnx::TensorProto &tensor : graph.initializer()) {
    initializerNames.insert(tensor.name());
    Constant constant;
    constant.unreadable = readTensor(tensor, constant);
    constants[tensor.name()] = std::move(constant);
  }
  for (const onnx::NodeProto &n : graph.node()) {
    if (n.op_type() != "Constant" || !n.domain().empty())
      continue;
    if (n.output_size() != 1)
      return "Constant node '" + n.name() + "' has " +
             std::to_string(n.output_size()) + " outputs; one expected";
    for (const onnx::AttributeProto &attr : n.attribute()) {
      Constant constant;
      if (attr.name() == "value" && attr.has_t()) {
        constant.unreadable = readTensor(attr.t(), constant);
      } else if (attr.name() == "value_float") {
        constant.floats = {attr.f()};
      } else if (attr.name() == "value_floats") {
        constant.floats.assign(attr.floats().begin(), attr.floats().end());
        constant.dims = {int64_t(constant.floats.size())};
      } else if (attr.name() == "value_int") {
        constant.isFloat = false;
        constant.ints = {attr.i()};
      } else if (attr.name() == "value_ints") {
        constant.isFloat = false;
        constant.ints.assign(attr.ints().begin(), attr.ints().end());
        constant.dims = {int64_t(constant.ints.size())};
      } else {
        continue;
      }
      constants[n.output(0)] = std::move(constant);
    }
    if (!constants.count(n.output(0)))
      return "Constant node '" + n.name() +
             "': only its value, value_float(s) and value_int(s) forms are "
             "supported";
  }
  // An Identity of a constant is that constant (PyTorch shares a mask
  // buffer between blocks so).
  // An Identity of an initializer is PyTorch's exporter merging parameters
  // of equal values (eval mode): each output is a parameter of its own under
  // its name, equal at the start, trained apart.
  for (const onnx::NodeProto &n : graph.node())
    if (isConstantIdentity(n)) {
      constants[n.output(0)] = constants.at(n.input(0));
      if (initializerNames.count(n.input(0)))
        initializerNames.insert(n.output(0));
    }
  return {};
}

bool GraphImporter::isConstantIdentity(const onnx::NodeProto &n) const {
  return n.op_type() == "Identity" && n.domain().empty() &&
         n.input_size() == 1 && n.output_size() == 1 &&
         constants.count(n.input(0));
}

bool GraphImporter::feedsOnlyImageOps(const std::string &name) {
  std::vector<const onnx::NodeProto *> users = consumersOf(name);
  for (const onnx::NodeProto *user : users) {
    const std::string &op = user->op_type();
    if ((op != "Conv" && op != "MaxPool" && op != "AveragePool" &&
         op != "BatchNormalization" && op != "GlobalAveragePool") ||
        user->input(0) != name)
      return false;
  }
  return !users.empty();
}

std::string GraphImporter::declareInputs(std::string &text) {
  int64_t batch = -1;
  std::string first;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (constants.count(input.name()))
      continue; // an initializer listed as an input (IR version < 4)
    const onnx::TypeProto::Tensor &type = input.type().tensor_type();
    const auto element = type.elem_type();
    if (element != onnx::TensorProto::FLOAT &&
        element != onnx::TensorProto::INT64 &&
        element != onnx::TensorProto::INT32)
      return "graph input '" + input.name() + "' has element type " +
             onnx::TensorProto::DataType_Name(
                 onnx::TensorProto::DataType(element)) +
             "; gpipe's inputs are float, int32 or int64 (read as i32)";
    std::vector<int64_t> shape;
    for (int i = 0; i < type.shape().dim_size(); ++i) {
      const auto &dim = type.shape().dim(i);
      if (dim.has_dim_value()) {
        if (dim.dim_value() <= 0 || dim.dim_value() > kMaxElements)
          return "graph input '" + input.name() + "' has dimension " +
                 std::to_string(i) + " of size " +
                 std::to_string(dim.dim_value()) +
                 "; gpipe needs sizes from 1 to 2^32";
        shape.push_back(dim.dim_value());
      } else if (i == 0 && options.batch > 0) {
        shape.push_back(options.batch);
      } else {
        std::string symbol =
            dim.has_dim_param() ? "'" + dim.dim_param() + "'" : "unnamed";
        return "graph input '" + input.name() + "' has a dynamic dimension " +
               symbol + " (dimension " + std::to_string(i) +
               "); gpipe needs static shapes" +
               (i == 0 ? ": give the batch with --batch N" : "");
      }
    }
    if (shape.empty())
      return "graph input '" + input.name() +
             "' is a scalar; gpipe's inputs have a batch dimension";
    if (batch < 0) {
      batch = shape[0];
      first = input.name();
    } else if (shape[0] != batch) {
      return "graph inputs '" + first + "' and '" + input.name() +
             "' have first dimensions " + std::to_string(batch) + " and " +
             std::to_string(shape[0]) +
             "; gpipe's inputs share the batch as their first dimension";
    }
    Value v;
    v.isFloat = element == onnx::TensorProto::FLOAT;
    v.shape = shape;
    if (v.isFloat && shape.size() == 4) { // images: NCHW held as NHWC
      v.layout = Layout::Nhwc;
      v.shape = {shape[0], shape[2], shape[3], shape[1]};
    } else if (v.isFloat && shape.size() == 3 &&
               feedsOnlyImageOps(input.name())) {
      v.layout =
          Layout::Ncl; // a 1-D signal [N, C, L] as the image [N, 1, L, C]
      v.shape = {shape[0], 1, shape[2], shape[1]};
    }
    v.ssa = "%in" + std::to_string(inputNames.size());
    inputNames.insert(input.name());
    text += "  " + v.ssa + " = gpipe.input \"" + input.name() +
            "\" : " + tensorType(v.shape, v.isFloat) + "\n";
    values[input.name()] = v;
  }
  if (batch < 0)
    return "the graph has no inputs besides its initializers";
  this->batch = batch;
  int64_t seq = 0;
  for (const onnx::NodeProto &n : graph.node()) {
    int tableInput;
    const Constant *table = patternOfNode.count(&n)
                                ? nullptr // a causal mask's Add
                                : positionTable(n, constants, tableInput);
    if (table && !seq)
      seq = table->dims[0];
  }
  if (seq > 0) {
    if (values.count("positions"))
      return "the graph adds a position table and has an input named "
             "'positions', the name of the positions input the importer adds";
    positionsShape = {batch, seq};
    positionsSsa = "%positions";
    text += "  %positions = gpipe.input \"positions\" : " +
            tensorType(positionsShape, false) + "\n";
  }
  std::string name = options.modelName.empty() ? onnxModelName(graph.name())
                                               : options.modelName;
  std::string invalid = validateModelName(name);
  if (!invalid.empty())
    return "model name '" + name + "': " + invalid;
  std::string header =
      "gpipe.model @" + name + " batch " + std::to_string(batch);
  if (!options.weightsFile.empty())
    header += " attributes {gpipe.weights = \"" + options.weightsFile + "\"}";
  text = header + " {\n" + text;
  return {};
}

std::string GraphImporter::groupLayers() {
  const unsigned depth = options.layerDepth == OnnxImportOptions::kAutoLayerDepth
                             ? blockDepth(graph)
                             : unsigned(options.layerDepth);
  std::string previous;
  int repeat = 0;
  std::map<std::string, int> seen;
  for (const onnx::NodeProto &n : graph.node()) {
    if ((n.op_type() == "Constant" && n.domain().empty()) ||
        isConstantIdentity(n)) {
      layerOfNode.push_back(-1);
      continue;
    }
    std::string key = scopeOf(n, depth);
    if (key.empty() || key != previous || layerNames.empty()) {
      std::string name = key.empty() ? lowercase(n.op_type()) : key;
      if (key.empty())
        name += "_" + std::to_string(layerNames.size());
      if ((repeat = seen[name]++) > 0) // a scope that comes back
        name += "." + std::to_string(repeat + 1);
      layerNames.push_back(name);
    }
    previous = key.empty() ? std::string("\x01") : key;
    layerOfNode.push_back(int(layerNames.size()) - 1);
  }
  // A pattern is written in its last node's layer (its other nodes' values
  // stay inside it).
  std::map<const onnx::NodeProto *, int> index;
  for (int i = 0; i < graph.node_size(); ++i)
    index[&graph.node(i)] = i;
  for (const auto &[covered, pattern] : patternOfNode)
    layerOfNode[size_t(index[covered])] =
        layerOfNode[size_t(index[patterns[pattern].last])];
  exported.resize(layerNames.size());
  return {};
}

const Value *GraphImporter::value(const std::string &name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

const Constant *GraphImporter::constant(const std::string &name) const {
  auto it = constants.find(name);
  return it == constants.end() || !it->second.unreadable.empty() ? nullptr
                                                                 : &it->second;
}

std::string GraphImporter::unreadable(const std::string &name) const {
  auto it = constants.find(name);
  return it == constants.end() ? std::string() : it->second.unreadable;
}

int64_t GraphImporter::intAttr(const std::string &name,
                               int64_t otherwise) const {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return a.i();
  return otherwise;
}

float GraphImporter::floatAttr(const std::string &name, float otherwise) const {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return a.f();
  return otherwise;
}

std::string GraphImporter::stringAttr(const std::string &name,
                                      const std::string &otherwise) const {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return a.s();
  return otherwise;
}

std::vector<int64_t> GraphImporter::intsAttr(const std::string &name) const {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return {a.ints().begin(), a.ints().end()};
  return {};
}

bool GraphImporter::hasAttr(const std::string &name) const {
  for (const onnx::AttributeProto &a : node->attribute())
    if (a.name() == name)
      return true;
  return false;
}

bool GraphImporter::isGraphOutput(const std::string &name) const {
  for (const onnx::ValueInfoProto &output : graph.output())
    if (output.name() == name)
      return true;
  return false;
}

const onnx::NodeProto *
GraphImporter::producerOf(const std::string &name) const {
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &output : n.output())
      if (output == name)
        return &n;
  return nullptr;
}

bool GraphImporter::isWeightTransposeForMatMuls(const onnx::NodeProto &node) {
  if (node.op_type() != "Transpose" || !node.domain().empty() ||
      node.input_size() != 1 || !isTrainable(node.input(0)) ||
      constant(node.input(0))->dims.size() != 2 ||
      isGraphOutput(node.output(0)))
    return false;
  for (const onnx::AttributeProto &a : node.attribute())
    if (a.name() == "perm" &&
        std::vector<int64_t>(a.ints().begin(), a.ints().end()) !=
            std::vector<int64_t>{1, 0})
      return false;
  std::vector<const onnx::NodeProto *> users = consumersOf(node.output(0));
  return !users.empty() &&
         std::all_of(users.begin(), users.end(), [&](const onnx::NodeProto *u) {
           return u->op_type() == "MatMul" && u->input_size() == 2 &&
                  u->input(1) == node.output(0) &&
                  u->input(0) != node.output(0);
         });
}

std::vector<const onnx::NodeProto *>
GraphImporter::consumersOf(const std::string &name) {
  std::vector<const onnx::NodeProto *> consumers;
  for (const onnx::NodeProto &n : graph.node())
    for (const std::string &input : n.input())
      if (input == name) {
        consumers.push_back(&n);
        break;
      }
  return consumers;
}

std::string GraphImporter::layerRef(int layer, const std::string &ssa) {
  if (layer < 0 || size_t(layer) >= exported.size())
    return ssa; // a model input: visible everywhere
  const std::vector<std::string> &out = exported[size_t(layer)];
  auto it = std::find(out.begin(), out.end(), ssa);
  if (it == out.end())
    return {};
  std::string ref = "%l" + std::to_string(layer);
  return out.size() == 1 ? ref : ref + "#" + std::to_string(it - out.begin());
}

std::string GraphImporter::use(const std::string &name) {
  const Value *v = value(name);
  if (!v)
    return {};
  if (v->layer < 0 || v->layer == currentLayer)
    return v->ssa;
  return layerRef(v->layer, v->ssa);
}

std::string GraphImporter::define(const std::string &name,
                                  std::vector<int64_t> shape, Layout layout,
                                  bool isFloat, bool isBool) {
  Value v;
  v.ssa = "%t" + std::to_string(nextSsa++);
  v.shape = std::move(shape);
  v.layout = layout;
  v.isFloat = isFloat && !isBool;
  v.isBool = isBool;
  v.layer = currentLayer;
  values[name] = v;
  return v.ssa;
}

std::string GraphImporter::defineLike(const std::string &name,
                                      std::vector<int64_t> shape,
                                      const Value &like, bool isFloat,
                                      bool isBool) {
  std::string ssa = define(name, std::move(shape), like.layout, isFloat, isBool);
  if (like.layout == Layout::Viewed)
    setView(name, like.viewGroups);
  return ssa;
}

void GraphImporter::alias(const std::string &alias, const std::string &of) {
  values[alias] = values.at(of);
}

std::string GraphImporter::param(const std::string &name,
                                 const std::vector<int64_t> &shape,
                                 std::vector<float> data, bool frozen) {
  auto declared = layerParams.find(name);
  if (declared != layerParams.end())
    return declared->second;
  auto owner = paramLayer.find(name);
  if (owner != paramLayer.end() && owner->second != currentLayer) {
    const std::string copy = name + "@" + layerNames[size_t(currentLayer)];
    if (options.untieWeights) // a copy of its own, trained apart
      return param(copy, shape, std::move(data), frozen);
    // Tied (an embedding table that is also the output projection): this
    // layer's copy of the one parameter, read alike.
    auto root = std::find_if(
        result.weights.begin(), result.weights.end(),
        [&](const runtime::NamedTensor &t) { return t.name == name; });
    if (root == result.weights.end() || root->shape != shape ||
        std::memcmp(root->data.data(), data.data(), data.size() * 4) != 0)
      return {}; // read in another layout: the caller reports it
    paramLayer[copy] = currentLayer;
    std::string ssa = "%p" + std::to_string(nextSsa++);
    layerParams[name] = ssa;
    emit(ssa + " = gpipe.param \"" + copy + "\" pretrained" +
         (frozen ? " frozen" : "") + " tied \"" + name +
         "\" : " + tensorType(shape, true));
    return ssa;
  }
  paramLayer[name] = currentLayer;
  std::string ssa = "%p" + std::to_string(nextSsa++);
  layerParams[name] = ssa;
  emit(ssa + " = gpipe.param \"" + name + "\" pretrained" +
       (frozen ? " frozen" : "") + " : " + tensorType(shape, true));
  result.weights.push_back({name, shape, std::move(data)});
  return ssa;
}

std::string GraphImporter::convertPatternOrItsNodes(const Pattern &pattern) {
  // A subgraph that is not the fused op after all (attention scaled
  // otherwise, a GELU with another constant) composes from general ops.
  const std::string savedBody = body;
  const size_t savedWeights = result.weights.size();
  const auto savedValues = values;
  const auto savedParams = layerParams;
  const auto savedOwners = paramLayer;
  const auto savedCache = layerCache;
  std::string unviewError;
  if (unview(pattern.input, unviewError) &&
      convertPattern(*this, pattern).empty())
    return {};
  body = savedBody;
  result.weights.resize(savedWeights);
  values = savedValues;
  layerParams = savedParams;
  paramLayer = savedOwners;
  layerCache = savedCache;
  const onnx::NodeProto *outer = node;
  for (const onnx::NodeProto &n : graph.node()) {
    if (!pattern.nodes.count(&n))
      continue;
    node = &n;
    bool folded = false;
    std::string error = fold(n, folded);
    if (error.empty() && !folded)
      error = convertNode(n);
    if (!error.empty())
      return "node '" + n.name() + "' (" + n.op_type() + "): " + error;
  }
  node = outer;
  return {};
}

/// The SSA values a line of the body reads (after its " = "; outside quoted
/// names, which may hold any character): "%v3" of "%v3#1" too.
static std::vector<std::string> valuesRead(const std::string &line,
                                           size_t from) {
  std::vector<std::string> read;
  bool quoted = false;
  for (size_t i = from; i < line.size(); ++i) {
    if (line[i] == '"' && (i == 0 || line[i - 1] != '\\'))
      quoted = !quoted;
    if (quoted || line[i] != '%')
      continue;
    size_t end = i + 1;
    while (end < line.size() &&
           (std::isalnum(uint8_t(line[end])) || line[end] == '_'))
      ++end;
    read.push_back(line.substr(i, end - i));
    i = end - 1;
  }
  return read;
}

void GraphImporter::dropUnusedConstants(
    const std::vector<std::string> &yielded) {
  // A constant read in another layout (permuted for a viewed operand) is
  // declared again in that layout; the first declaration, and the cast of
  // an integer one, may then be read by nothing. Such lines go, and the
  // lines that only they read after them (a cast's constant); the weights
  // of constants no longer declared go with them. Linear in the body.
  std::vector<std::string> lines;
  for (size_t at = 0; at < body.size();) {
    const size_t end = std::min(body.find('\n', at), body.size() - 1);
    lines.push_back(body.substr(at, end - at + 1));
    at = end + 1;
  }
  std::map<std::string, size_t> definedBy;
  std::map<std::string, int> reads;
  std::vector<size_t> operandsAt(lines.size(), 0);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string &line = lines[i];
    const size_t first = line.find_first_not_of(' ');
    const size_t eq = line.find(" = ");
    if (first != std::string::npos && line[first] == '%' &&
        eq != std::string::npos) {
      definedBy[line.substr(first, eq - first)] = i;
      operandsAt[i] = eq + 3;
    }
    for (const std::string &value : valuesRead(line, operandsAt[i]))
      ++reads[value];
  }
  for (const std::string &value : yielded)
    ++reads[value];
  auto droppable = [&](size_t i) {
    const std::string &line = lines[i];
    const bool frozenParam =
        line.find(" = gpipe.param \"") != std::string::npos &&
        line.find(" frozen") != std::string::npos &&
        line.find(" tied ") == std::string::npos;
    return frozenParam || line.find(" = gpipe.cast ") != std::string::npos;
  };
  std::vector<size_t> unread;
  for (const auto &[value, i] : definedBy)
    if (reads[value] == 0 && droppable(i))
      unread.push_back(i);
  std::vector<char> gone(lines.size(), 0);
  std::set<std::string> dropped;
  while (!unread.empty()) {
    const size_t i = unread.back();
    unread.pop_back();
    if (gone[i])
      continue;
    gone[i] = 1;
    const std::string &line = lines[i];
    if (line.find(" = gpipe.param \"") != std::string::npos) {
      const size_t nameAt = line.find('"') + 1;
      dropped.insert(line.substr(nameAt, line.find('"', nameAt) - nameAt));
    }
    for (const std::string &value : valuesRead(line, operandsAt[i])) {
      auto def = definedBy.find(value);
      if (--reads[value] == 0 && def != definedBy.end() &&
          droppable(def->second))
        unread.push_back(def->second);
    }
  }
  body.clear();
  for (size_t i = 0; i < lines.size(); ++i)
    if (!gone[i])
      body += lines[i];
  for (const std::string &name : dropped) {
    layerParams.erase(name);
    paramLayer.erase(name);
  }
  result.weights.erase(std::remove_if(result.weights.begin(),
                                      result.weights.end(),
                                      [&](const runtime::NamedTensor &t) {
                                        return dropped.count(t.name) != 0;
                                      }),
                       result.weights.end());
}

std::string GraphImporter::writeLayers(std::string &text) {
  const int numNodes = graph.node_size();
  for (int layer = 0; layer < int(layerNames.size()); ++layer) {
    currentLayer = layer;
    body.clear();
    layerParams.clear();
    layerCache.clear();
    for (int i = 0; i < numNodes; ++i) {
      const onnx::NodeProto &n = graph.node(i);
      if (layerOfNode[size_t(i)] != layer || skipped.count(&n))
        continue;
      node = &n;
      auto pattern = patternOfNode.find(&n);
      if (pattern != patternOfNode.end() &&
          patterns[pattern->second].last != &n)
        continue; // written with the pattern's last node
      bool folded = false;
      std::string error;
      if (pattern == patternOfNode.end()) {
        error = fold(n, folded);
        if (error.empty() && !folded)
          error = convertNode(n);
      } else {
        error = convertPatternOrItsNodes(patterns[pattern->second]);
      }
      if (!error.empty())
        return std::string(pattern == patternOfNode.end()
                               ? ""
                               : "the subgraph ending at ") +
               "node '" + n.name() + "' (" + n.op_type() + ", opset " +
               std::to_string(opset) + "): " + error;
    }
    if (std::string error = unviewOutputs(); !error.empty())
      return error;
    // What this layer defined, with the outputs of the nodes it absorbed (a
    // MatMul's bias Add) and of its patterns.
    std::set<std::string> definedHere;
    for (const auto &[name, v] : values)
      if (v.layer == layer)
        definedHere.insert(name);
    // Results: values a later layer or the loss reads.
    std::vector<std::string> &out = exported[size_t(layer)];
    std::vector<std::string> types;
    auto yieldValue = [&](const Value &v) {
      if (v.layer != layer ||
          std::find(out.begin(), out.end(), v.ssa) != out.end())
        return;
      out.push_back(v.ssa);
      types.push_back(tensorType(v.shape, v.isFloat));
    };
    for (const std::string &name : definedHere) {
      const Value *v = value(name);
      if (!v)
        continue;
      bool needed = isGraphOutput(name);
      for (int i = 0; i < numNodes && !needed; ++i)
        if (layerOfNode[size_t(i)] > layer)
          for (const std::string &input : graph.node(i).input())
            needed = needed || input == name;
      if (needed)
        yieldValue(*v);
    }
    if (!lossValue.empty() && value(lossValue)->layer == layer)
      yieldValue(*value(lossValue));
    dropUnusedConstants(out);
    if (out.empty() && body.empty())
      continue; // only aliases (an Identity, a Flatten of [N, C])
    std::string typeList;
    for (size_t i = 0; i < types.size(); ++i)
      typeList += (i ? ", " : "") + types[i];
    std::string lhs = "%l" + std::to_string(layer);
    if (out.size() > 1)
      lhs += ":" + std::to_string(out.size());
    text += "  " + (out.empty() ? std::string() : lhs + " = ") +
            "gpipe.layer \"" + layerNames[size_t(layer)] + "\"" +
            (out.empty() ? "" : " -> " + typeList) + " {\n" + body;
    std::string yielded;
    for (size_t i = 0; i < out.size(); ++i)
      yielded += (i ? ", " : "") + out[i];
    text += "    gpipe.yield" +
            (out.empty() ? std::string() : " " + yielded + " : " + typeList) +
            "\n  }\n";
  }
  currentLayer = -1;
  return {};
}

std::string GraphImporter::appendLoss(std::string &text, int &nextLayer) {
  if (!lossValue.empty()) {
    const Value &loss = *value(lossValue);
    text += "  gpipe.return " + layerRef(loss.layer, loss.ssa) +
            " : tensor<f32>\n}\n";
    return {};
  }
  const std::string output = graph.output(0).name();
  const Value *out = value(output);
  if (!out)
    return "graph output '" + output + "' is never computed";
  const Value &labels = values.at(options.labels);
  std::string op = options.loss == "mse" ? "mse_loss" : "softmax_cross_entropy";
  const std::string outRef =
      out->layer < 0 ? out->ssa : layerRef(out->layer, out->ssa);
  text += "  %loss = gpipe.layer \"loss\" -> tensor<f32> {\n    %0 = gpipe." +
          op + " " + outRef + ", " + labels.ssa + " : (" +
          tensorType(out->shape, true) + ", " +
          tensorType(labels.shape, labels.isFloat) +
          ") -> tensor<f32>\n    gpipe.yield %0 : tensor<f32>\n  }\n";
  text += "  gpipe.return %loss : tensor<f32>\n}\n";
  ++nextLayer;
  return {};
}

std::string GraphImporter::run() {
  std::string error = readConstants();
  for (const onnx::ValueInfoProto &input : graph.input())
    if (!constants.count(input.name()))
      perExampleNames.insert(input.name());
  for (const onnx::NodeProto &n : graph.node()) {
    if (n.op_type() == "Shape" || n.op_type() == "Size")
      continue; // a shape, the same for every example
    bool perExample = false;
    for (int i = 0; i < n.input_size(); ++i) // CastLike reads input 1's type
      perExample = perExample || (perExampleNames.count(n.input(i)) &&
                                  !(n.op_type() == "CastLike" && i == 1));
    if (perExample)
      for (const std::string &output : n.output())
        perExampleNames.insert(output);
  }
  if (error.empty()) {
    patterns = findPatterns(graph, constants, patternMisses);
    for (size_t i = 0; i < patterns.size(); ++i)
      for (const onnx::NodeProto *covered : patterns[i].nodes)
        patternOfNode[covered] = i;
    error = groupLayers();
  }
  std::string text;
  if (error.empty())
    error = declareInputs(text);
  if (!error.empty())
    return error;
  bool hasLoss = false;
  for (const onnx::NodeProto &n : graph.node())
    hasLoss = hasLoss || n.op_type() == "SoftmaxCrossEntropyLoss";
  if (!hasLoss) {
    if (options.loss.empty())
      return "the graph computes no loss: give --loss softmax-cross-entropy "
             "(with --labels NAME, an integer input of class indices) or "
             "--loss mse (with --labels NAME, a target of the output's "
             "shape)";
    if (options.loss != "softmax-cross-entropy" && options.loss != "mse")
      return "unknown loss '" + options.loss +
             "': expected softmax-cross-entropy or mse";
    if (values.count(options.labels))
      return "--labels '" + options.labels +
             "' names a graph input already; choose another name";
  }
  std::string layers;
  error = writeLayers(layers);
  if (!error.empty())
    return error;
  if (!hasLoss) {
    // The labels input, shaped after the output as gpipe holds it.
    const std::string output = graph.output(0).name();
    const Value *out = value(output);
    if (!out)
      return "graph output '" + output + "' is never computed";
    if (options.loss != "mse" && out->shape.size() < 2)
      return "graph output '" + output + "' has shape " +
             shapeText(out->shape) +
             "; softmax cross-entropy needs [batch, ..., classes]";
    Value labels;
    labels.isFloat = options.loss == "mse";
    labels.shape = out->shape;
    if (!labels.isFloat)
      labels.shape.pop_back();
    labels.ssa = "%labels";
    text += "  %labels = gpipe.input \"" + options.labels +
            "\" : " + tensorType(labels.shape, labels.isFloat) + "\n";
    values[options.labels] = labels;
  }
  text += layers;
  if (const Value *out = value(graph.output(0).name()))
    result.outputChannelsLast = isImage(out->layout);
  int next = int(layerNames.size());
  error = appendLoss(text, next);
  if (!error.empty())
    return error;
  result.mlir = std::move(text);
  return {};
}

std::string gpipe::onnxModelName(std::string_view text) {
  std::string name;
  for (char c : text)
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])))
    name = "onnx_" + name;
  return name;
}

std::string gpipe::importOnnx(std::string_view bytes,
                              const OnnxImportOptions &options,
                              OnnxImport &result) {
  onnx::ModelProto model;
  if (bytes.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(bytes.data(), int(bytes.size())) ||
      !model.has_graph())
    return "not a complete ONNX model: the " + std::to_string(bytes.size()) +
           " bytes do not parse as an ONNX ModelProto (another format, or a "
           "truncated file)";
  if (model.ir_version() <= 0)
    return "the model's ONNX IR version is " +
           std::to_string(model.ir_version()) +
           "; a model's is at least 1 (the field is missing or damaged)";
  int64_t opset = -1;
  for (const onnx::OperatorSetIdProto &entry : model.opset_import())
    if (entry.domain().empty() || entry.domain() == "ai.onnx")
      opset = entry.version();
  if (opset < 0)
    return "the model imports no opset of the default ONNX domain";
  if (opset > kNewestOpset)
    return "the model uses opset " + std::to_string(opset) +
           " of the default ONNX domain; gpipe reads opsets up to " +
           std::to_string(kNewestOpset);
  if (model.ir_version() > kNewestIrVersion)
    return "the model is of ONNX IR version " +
           std::to_string(model.ir_version()) + "; gpipe reads versions up to " +
           std::to_string(kNewestIrVersion);
  // libonnx 1.12 knows the schemas of opsets up to 17 and IR versions up to
  // 8; a newer model is checked by the importer's own checks alone (every
  // operand, attribute and shape it reads), as the older one is too.
  const bool libonnxReads = opset <= 17 && model.ir_version() <= 8;
  // Only models of the ops gpipe maps reach libonnx's checker and shape
  // inference: fuzzing found its shape inference of other ops crashing on
  // malformed attributes (ConvTranspose), and of Conv and the pools on zero
  // strides, which it divides by unchecked; those are refused first too.
  // One error lists every node of an op gpipe does not map.
  std::map<std::string, std::vector<std::string>> unmapped;
  std::string why;
  for (const onnx::NodeProto &node : model.graph().node()) {
    std::string unsupported = onnx_import::unsupportedOp(node);
    if (unsupported.empty())
      continue;
    why = unsupported;
    std::string type = node.domain().empty() || node.domain() == "ai.onnx"
                           ? node.op_type()
                           : node.domain() + "." + node.op_type();
    unmapped[type].push_back("'" + node.name() + "'");
  }
  if (unmapped.size() == 1 && unmapped.begin()->second.size() == 1) {
    const auto &[type, nodes] = *unmapped.begin();
    return "node " + nodes[0] + " (" + type + ", opset " +
           std::to_string(opset) + "): " + why;
  }
  if (!unmapped.empty()) {
    std::string list;
    size_t count = 0;
    for (const auto &[type, nodes] : unmapped) {
      count += nodes.size();
      std::string names;
      for (size_t i = 0; i < nodes.size(); ++i)
        names += (i ? ", " : "") + nodes[i];
      list += "\n  " + type + " (" + std::to_string(nodes.size()) +
              (nodes.size() == 1 ? " node): " : " nodes): ") + names;
    }
    return std::to_string(count) + " nodes of " +
           std::to_string(unmapped.size()) +
           " op types gpipe does not map (opset " + std::to_string(opset) +
           "):" + list + "\ngpipe maps " +
           why.substr(why.find("gpipe maps ") + 11);
  }
  for (const onnx::NodeProto &node : model.graph().node())
    for (const onnx::AttributeProto &attr : node.attribute()) {
      const std::string &name = attr.name();
      const bool positive = name == "strides" || name == "dilations" ||
                            name == "kernel_shape" || name == "group";
      if (!positive && name != "pads")
        continue;
      std::vector<int64_t> values(attr.ints().begin(), attr.ints().end());
      if (attr.type() == onnx::AttributeProto::INT)
        values.push_back(attr.i());
      for (int64_t v : values)
        if (v < (positive ? 1 : 0))
          return "node '" + node.name() + "' (" + node.op_type() +
                 "): attribute " + name + " holds " + std::to_string(v) +
                 "; it must be " + (positive ? "positive" : "non-negative");
    }
  try {
    if (libonnxReads)
      onnx::checker::check_model(model);
  } catch (const std::exception &e) {
    return std::string("the ONNX checker rejects the model: ") + e.what();
  }
  if (model.graph().output_size() == 0)
    return "the graph has no outputs";
  GraphImporter importer(model, options, result);
  importer.opset = opset;
  std::string error = importer.run();
  if (!error.empty())
    return error;
  // ONNX's shape inference, after the conversion has checked every
  // attribute it supports against the operands' ranks: libonnx's inference
  // reads an out-of-range axis out of bounds (found by fuzzing).
  try {
    if (libonnxReads)
      onnx::shape_inference::InferShapes(model);
  } catch (const std::exception &e) {
    result = OnnxImport();
    return std::string("ONNX shape inference fails: ") + e.what();
  }
  return {};
}
