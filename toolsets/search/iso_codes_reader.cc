#include "toolsets/search/iso_codes_reader.h"

#include <unistd.h>

#include <map>
#include <set>
#include <string_view>

#include "base/fd.h"
#include "base/json.h"

namespace envforge::search {
namespace {

struct Standard {
  const char* file;      // in the json directory
  const char* key;       // the top-level member holding the entries
  const char* id_field;  // the code that names an entry
  const char* kind;      // what an entry is
};

// 3166-1 first: subdivisions name their country.
constexpr Standard kStandards[] = {
    {"iso_3166-1.json", "3166-1", "alpha_2", "country"},
    {"iso_3166-2.json", "3166-2", "code", "country subdivision"},
    {"iso_3166-3.json", "3166-3", "alpha_4", "former country"},
    {"iso_4217.json", "4217", "alpha_3", "currency"},
    {"iso_639-2.json", "639-2", "alpha_3", "language"},
    {"iso_639-3.json", "639-3", "alpha_3", "language"},
    {"iso_639-5.json", "639-5", "alpha_3", "language family or group"},
    {"iso_15924.json", "15924", "alpha_4", "script"},
};

std::string DocId(std::string_view standard, std::string_view code) {
  return "iso" + std::string(standard) + ":" + std::string(code);
}

// ISO 639-3's one-letter scope and type codes, spelled out.
std::string FieldValue(std::string_view standard, std::string_view field, const std::string& value) {
  if (standard != "639-3") return value;
  static const std::map<std::string, std::string> kScope = {
      {"I", "individual language"}, {"M", "macrolanguage"}, {"S", "special"}};
  static const std::map<std::string, std::string> kType = {{"A", "ancient"},    {"C", "constructed"}, {"E", "extinct"},
                                                           {"H", "historical"}, {"L", "living"},      {"S", "special"}};
  const auto& names = field == "scope" ? kScope : kType;
  if (field != "scope" && field != "type") return value;
  auto it = names.find(value);
  return it == names.end() ? value : it->second;
}

std::string FieldLabel(std::string label) {
  for (char& c : label) {
    if (c == '_') c = ' ';
  }
  return label;
}

// The links of a 3166-2 subdivision ("FR-75", parent "IDF"): its country and its parent.
void AddSubdivisionLinks(Document& document, const Json& entry, const std::string& code,
                         const std::map<std::string, std::string>& country_names) {
  const std::string country = code.substr(0, code.find('-'));
  auto name = country_names.find(country);
  document.links.push_back(
      DocumentLink{DocId("3166-1", country), "country: " + (name == country_names.end() ? country : name->second)});
  if (name != country_names.end()) document.text += "\ncountry: " + name->second;
  if (entry.contains("parent") && entry["parent"].is_string()) {
    const std::string parent = country + "-" + entry["parent"].get<std::string>();
    document.links.push_back(DocumentLink{DocId("3166-2", parent), "parent subdivision: " + parent});
  }
}

Result<Document> EntryDocument(const Standard& standard, const Json& entry,
                               const std::map<std::string, std::string>& country_names) {
  if (!entry.is_object() || !entry.contains(standard.id_field) || !entry[standard.id_field].is_string() ||
      !entry.contains("name") || !entry["name"].is_string()) {
    return DataLossError(std::string("an entry without a string '") + standard.id_field + "' and 'name'");
  }
  const std::string code = entry[standard.id_field].get<std::string>();
  Document document{
      DocId(standard.key, code), entry["name"].get<std::string>(), DocId(standard.key, code), "iso-codes", {}, {}};
  document.text = document.title + "\nISO " + standard.key + " " + standard.kind;
  for (const auto& [field, value] : entry.items()) {
    if (!value.is_string()) continue;
    document.text += "\n" + FieldLabel(field) + ": " + FieldValue(standard.key, field, value.get<std::string>());
  }
  if (std::string_view(standard.key) == "3166-2") AddSubdivisionLinks(document, entry, code, country_names);
  return document;
}

Status ReadStandard(const std::string& path, const Standard& standard,
                    std::map<std::string, std::string>& country_names, const DocumentSink& sink) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto json = ParseJson(text, path);
  if (!json.ok()) return DataLossError(json.status().message());
  if (!json->is_object() || !json->contains(standard.key) || !(*json)[standard.key].is_array()) {
    return DataLossError(path + ": no array under '" + standard.key + "'");
  }
  std::set<std::string> seen;
  for (const Json& entry : (*json)[standard.key]) {
    Result<Document> document = EntryDocument(standard, entry, country_names);
    if (!document.ok()) return DataLossError(path + ": " + document.status().message());
    if (!seen.insert(document->doc_id).second) continue;
    if (std::string_view(standard.key) == "3166-1")
      country_names[entry[standard.id_field].get<std::string>()] = document->title;
    ENVFORGE_RETURN_IF_ERROR(sink(*document));
  }
  return Status::Ok();
}

}  // namespace

Status ReadIsoCodes(const std::string& dir, const DocumentSink& sink) {
  std::map<std::string, std::string> country_names;
  bool any = false;
  for (const Standard& standard : kStandards) {
    const std::string path = dir + "/" + standard.file;
    if (::access(path.c_str(), F_OK) != 0) continue;
    any = true;
    ENVFORGE_RETURN_IF_ERROR(ReadStandard(path, standard, country_names, sink));
  }
  if (!any) return NotFoundError("no iso-codes JSON files (iso_3166-1.json, iso_639-3.json, ...) in " + dir);
  return Status::Ok();
}

}  // namespace envforge::search
