// Preserialized JSON nodes (contract in base/preserialized_json.h).
#include "base/preserialized_json.h"

#include <cstdint>

namespace envforge {

namespace {

// "JS": marks a binary value as preserialized JSON text rather than bytes.
constexpr std::uint64_t kPreserializedJsonSubtype = 0x4a53;

std::string DumpPlain(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

bool ContainsPreserialized(const Json& value) {
  if (value.is_binary()) return IsPreserializedJson(value);
  if (!value.is_structured()) return false;
  for (const auto& child : value) {
    if (ContainsPreserialized(child)) return true;
  }
  return false;
}

// Walks down only where a preserialized node lies; every other subtree is one nlohmann dump.
void AppendSplicing(const Json& value, std::string& out) {
  if (IsPreserializedJson(value)) {
    const auto& text = value.get_binary();
    out.append(text.begin(), text.end());
  } else if (!ContainsPreserialized(value)) {
    out += DumpPlain(value);
  } else if (value.is_object()) {
    out += '{';
    for (auto member = value.begin(); member != value.end(); ++member) {
      if (member != value.begin()) out += ',';
      out += DumpPlain(Json(member.key()));
      out += ':';
      AppendSplicing(member.value(), out);
    }
    out += '}';
  } else {
    out += '[';
    for (auto element = value.begin(); element != value.end(); ++element) {
      if (element != value.begin()) out += ',';
      AppendSplicing(*element, out);
    }
    out += ']';
  }
}

}  // namespace

Json PreserializedJson(const Json& value) {
  std::string text = DumpPlain(value);
  return Json::binary(Json::binary_t::container_type(text.begin(), text.end()), kPreserializedJsonSubtype);
}

bool IsPreserializedJson(const Json& value) {
  return value.is_binary() && value.get_binary().has_subtype() &&
         value.get_binary().subtype() == kPreserializedJsonSubtype;
}

std::optional<std::string> DumpSplicingPreserialized(const Json& value) {
  if (!ContainsPreserialized(value)) return std::nullopt;
  std::string out;
  AppendSplicing(value, out);
  return out;
}

}  // namespace envforge
