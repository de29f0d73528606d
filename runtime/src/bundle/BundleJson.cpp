//===- BundleJson.cpp - Typed fields of the bundle's JSON -----------------===//
//
// The reader's field getters: each checks the JSON type and range of one
// field and names its location in the error; and the checksum's check.
//
//===----------------------------------------------------------------------===//

#include "bundle/BundleJson.h"
#include "gpipe/runtime/bundle/BundleChecksum.h"

#include <climits>
#include <cmath>
#include <limits>
#include <locale>
#include <sstream>

using namespace gpipe::runtime;
using namespace gpipe::runtime::bundlejson;

std::string gpipe::runtime::bundlejson::dumpJson(const Json &value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

/// "a string", "an array", ... for "found ..." in messages.
std::string gpipe::runtime::bundlejson::describe(const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    return "a number";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::object:
    return "an object";
  case Json::value_t::binary:
    return "binary data";
  case Json::value_t::discarded:
    break;
  }
  return "nothing";
}

/// A found value for a message: the JSON text, shortened.
std::string gpipe::runtime::bundlejson::shortText(const Json &value) {
  std::string text = dumpJson(value);
  if (text.size() > 40)
    text = text.substr(0, 37) + "...";
  return text;
}

/// "1 stage", "2 stages"; `plural` for nouns that take more than an "s".
std::string gpipe::runtime::bundlejson::plural(size_t count, const char *noun,
                                               const char *pluralNoun) {
  std::string many = pluralNoun ? pluralNoun : std::string(noun) + "s";
  return std::to_string(count) + " " + (count == 1 ? noun : many);
}

std::string gpipe::runtime::bundlejson::keyPath(const std::string &path,
                                                const char *key) {
  return path.empty() ? key : path + "." + key;
}

std::string gpipe::runtime::bundlejson::indexPath(const std::string &path,
                                                  size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::string
gpipe::runtime::bundlejson::quotedList(const std::set<std::string> &names) {
  if (names.empty())
    return "none";
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "'" : ", '") + name + "'";
  return text;
}

bool Reader::expectObject(const Json &value, const std::string &path) {
  if (!value.is_object())
    return fail(path, "expected an object, found " + describe(value));
  return true;
}

bool Reader::checkKeys(const Json &object, const std::string &path,
                       const std::vector<const char *> &allowed,
                       const std::string &owner) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool known = false;
    for (const char *key : allowed)
      known |= it.key() == key;
    if (known)
      continue;
    std::string expected;
    for (const char *key : allowed)
      expected += (expected.empty() ? "" : ", ") + std::string(key);
    return fail(path, "unknown key '" + it.key() + "'" +
                          (owner.empty() ? "" : " for " + owner) +
                          "; expected one of " + expected);
  }
  return true;
}

bool Reader::lookup(const Json &object, const std::string &path,
                    const char *key, bool required, const Json *&out) {
  auto it = object.find(key);
  out = it == object.end() ? nullptr : &*it;
  if (!out && required)
    return fail(path, std::string("missing key '") + key + "'");
  return true;
}

bool Reader::getString(const Json &object, const std::string &path,
                       const char *key, std::string &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  if (!value->is_string())
    return fail(path, std::string("expected a string '") + key + "', found " +
                          describe(*value));
  out = value->get<std::string>();
  return true;
}

bool Reader::getBool(const Json &object, const std::string &path,
                     const char *key, bool &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  if (!value->is_boolean())
    return fail(path, std::string("expected a boolean '") + key + "', found " +
                          describe(*value));
  out = value->get<bool>();
  return true;
}

bool Reader::getNumber(const Json &object, const std::string &path,
                       const char *key, double &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  if (!value->is_number())
    return fail(path, std::string("expected a number '") + key + "', found " +
                          describe(*value));
  out = value->get<double>();
  return true;
}

bool Reader::getFloat(const Json &object, const std::string &path,
                      const char *key, float &out, bool required) {
  double value = out;
  if (!getNumber(object, path, key, value, required))
    return false;
  if (std::fabs(value) > double(std::numeric_limits<float>::max()))
    return fail(path, std::string("expected a 32-bit float '") + key +
                          "', found " + dumpJson(Json(value)));
  out = static_cast<float>(value);
  return true;
}

bool Reader::integerValue(const Json &value, const std::string &path,
                          const std::string &what, int64_t &out) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max()))
      return fail(path, "expected " + what + " that fits in 64 bits, found " +
                            std::to_string(u));
    out = int64_t(u);
    return true;
  }
  if (value.is_number_integer()) {
    out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_float())
    return fail(path, "expected " + what + ", found the non-integer number " +
                          shortText(value));
  return fail(path, "expected " + what + ", found " + describe(value));
}

bool Reader::getInt(const Json &object, const std::string &path,
                    const char *key, int64_t &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  return integerValue(*value, path, std::string("an integer '") + key + "'",
                      out);
}

bool Reader::getIndex(const Json &object, const std::string &path,
                      const char *key, unsigned &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  std::string what = std::string("a non-negative integer '") + key + "'";
  int64_t number;
  if (!integerValue(*value, path, what, number))
    return false;
  if (number < 0)
    return fail(path, "expected " + what + ", found " + std::to_string(number));
  if (number > int64_t(UINT_MAX))
    return fail(path, std::string("'") + key +
                          "' is too large: " + std::to_string(number) +
                          " (at most " + std::to_string(UINT_MAX) + ")");
  out = unsigned(number);
  return true;
}

bool Reader::getSeed(const Json &object, const std::string &path,
                     const char *key, uint64_t &out, bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value)
    return true;
  if (value->is_number_unsigned()) {
    out = value->get<uint64_t>();
    return true;
  }
  if (value->is_number_integer()) {
    out = uint64_t(value->get<int64_t>());
    return true;
  }
  int64_t unused;
  return integerValue(*value, path, std::string("an integer '") + key + "'",
                      unused);
}

bool Reader::getArray(const Json &object, const std::string &path,
                      const char *key, const Json *&out) {
  if (!lookup(object, path, key, true, out))
    return false;
  if (!out->is_array())
    return fail(path, std::string("expected an array '") + key + "', found " +
                          describe(*out));
  return true;
}

bool Reader::getIntArray(const Json &object, const std::string &path,
                         const char *key, std::vector<int64_t> &out,
                         bool required) {
  const Json *value;
  if (!lookup(object, path, key, required, value))
    return false;
  if (!value) {
    out.clear();
    return true;
  }
  if (!value->is_array())
    return fail(path, std::string("expected an array '") + key + "', found " +
                          describe(*value));
  out.assign(value->size(), 0);
  for (size_t i = 0; i < value->size(); ++i)
    if (!integerValue((*value)[i], indexPath(keyPath(path, key), i),
                      "an integer", out[i]))
      return false;
  return true;
}

bool Reader::readPair(const Json &json, const std::string &path,
                      const char *key, int64_t minimum, int64_t (&out)[2]) {
  std::vector<int64_t> values;
  if (!getIntArray(json, path, key, values, /*required=*/false))
    return false;
  if (values.empty() && !json.contains(key))
    return true; // the default
  if (values.size() != 2 || values[0] < minimum || values[1] < minimum)
    return fail(path, std::string("expected '") + key +
                          "' as 2 values >= " + std::to_string(minimum) +
                          " [rows, columns], found " + json.at(key).dump());
  out[0] = values[0], out[1] = values[1];
  return true;
}

bool Reader::verifyChecksum(const Json &root, std::string_view text) {
  const Json *checksum;
  if (!lookup(root, "", "checksum", false, checksum))
    return false;
  if (!checksum)
    return fail("", "missing key 'checksum'; a version 2 bundle ends with "
                    "\"checksum\": \"crc32:<8 hex digits>\", which "
                    "gpipe-translate writes");
  std::string claimed =
      checksum->is_string() ? checksum->get<std::string>() : std::string();
  bool wellFormed =
      claimed.size() == 14 && claimed.rfind("crc32:", 0) == 0 &&
      claimed.find_first_not_of("0123456789abcdef", 6) == std::string::npos;
  if (!wellFormed)
    return fail("checksum", "expected \"crc32:\" and 8 lowercase hex digits, "
                            "found " +
                                shortText(*checksum));
  std::string lastKey = std::prev(root.end()).key();
  if (lastKey != "checksum")
    return fail("checksum", "expected the last member of the bundle, found "
                            "'" +
                                lastKey + "' after it");
  size_t summed = checksummedLength(text);
  std::string actual = checksumText(text.substr(0, summed));
  if (summed == std::string_view::npos || actual != claimed)
    return fail("checksum", "the content sums to " + actual +
                                " but the file says " + claimed +
                                ": the bundle was corrupted or edited after "
                                "it was written");
  return true;
}
