#include "verifiers/answer_space.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>

#include "toolsets/json_schema.h"

namespace envforge::verifiers {
namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string QuoteIdentifier(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    out += c;
    if (c == '"') out += '"';
  }
  out += '"';
  return out;
}

// RFC 6901 escaping of one reference token.
std::string EscapeToken(const std::string& token) {
  std::string out;
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<Json> ToJsonValue(const SqlValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return Json(*i);
  if (const auto* d = std::get_if<double>(&value)) return Json(*d);
  if (const auto* s = std::get_if<std::string>(&value)) return Json(*s);
  return std::nullopt;  // NULL and blobs are not answer values
}

// The catalogue's spelling of a data table, or InvalidArgument.
Result<std::string> ResolveTable(Database& db, const std::string& table, const std::string& annotation) {
  auto stmt = db.Prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND lower(name) = lower(?)"
      " AND substr(name, 1, 1) <> '_' AND substr(name, 1, 7) <> 'sqlite_'");
  if (!stmt.ok()) return stmt.status();
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, table));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row) return InvalidArgumentError("x-domain '" + annotation + "': no data table '" + table + "' in the bundle");
  return stmt->ColumnText(0);
}

Result<std::vector<std::string>> TableColumns(Database& db, const std::string& table) {
  auto stmt = db.Prepare("SELECT name FROM pragma_table_info(?) ORDER BY cid");
  if (!stmt.ok()) return stmt.status();
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, table));
  std::vector<std::string> columns;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) return columns;
    columns.push_back(stmt->ColumnText(0));
  }
}

Result<std::string> ResolveColumn(Database& db, const std::string& table, const std::string& column,
                                  const std::string& annotation) {
  ENVFORGE_ASSIGN_OR_RETURN(auto columns, TableColumns(db, table));
  for (const auto& name : columns) {
    if (Lower(name) == Lower(column)) return name;
  }
  return InvalidArgumentError("x-domain '" + annotation + "': table '" + table + "' has no column '" + column + "'");
}

Result<std::string> PrimaryKeyColumn(Database& db, const std::string& table) {
  auto stmt = db.Prepare("SELECT name FROM pragma_table_info(?) WHERE pk > 0 ORDER BY pk");
  if (!stmt.ok()) return stmt.status();
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, table));
  std::vector<std::string> keys;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    keys.push_back(stmt->ColumnText(0));
  }
  if (keys.size() != 1) return NotFoundError("no single-column primary key");
  return keys[0];
}

// Single-column foreign keys of `table` to data tables: (column, parent table, parent column).
Result<std::vector<std::array<std::string, 3>>> ForeignKeys(Database& db, const std::string& table) {
  auto stmt = db.Prepare(
      "SELECT id, \"table\", \"from\", \"to\" FROM pragma_foreign_key_list(?) WHERE id IN"
      " (SELECT id FROM pragma_foreign_key_list(?) GROUP BY id HAVING count(*) = 1) ORDER BY id");
  if (!stmt.ok()) return stmt.status();
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(1, table));
  ENVFORGE_RETURN_IF_ERROR(stmt->Bind(2, table));
  std::vector<std::array<std::string, 3>> keys;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    std::string parent = stmt->ColumnText(1);
    std::string from = stmt->ColumnText(2);
    std::string to = stmt->ColumnIsNull(3) ? std::string() : stmt->ColumnText(3);
    auto parent_table = ResolveTable(db, parent, table);
    if (!parent_table.ok()) continue;  // a reference to a reserved or missing table: not a relation
    if (to.empty()) {
      auto pk = PrimaryKeyColumn(db, *parent_table);
      if (!pk.ok()) continue;
      to = *pk;
    } else {
      auto resolved = ResolveColumn(db, *parent_table, to, table);
      if (!resolved.ok()) continue;
      to = *resolved;
    }
    keys.push_back({from, *parent_table, to});
  }
  return keys;
}

Status ReadLink(Database& db, const std::string& table, const std::string& column,
                const std::array<std::string, 3>& key, Domain& domain) {
  DomainLink link;
  link.column = key[0];
  link.parent = key[1] + "." + key[2];
  auto stmt = db.Prepare("SELECT DISTINCT " + QuoteIdentifier(column) + ", " + QuoteIdentifier(key[0]) + " FROM " +
                         QuoteIdentifier(table) + " WHERE " + QuoteIdentifier(column) + " IS NOT NULL AND " +
                         QuoteIdentifier(key[0]) + " IS NOT NULL ORDER BY 2, 1");
  if (!stmt.ok()) return stmt.status();
  link.parents.resize(domain.values.size());
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    auto value = ToJsonValue(stmt->Column(0));
    auto parent = ToJsonValue(stmt->Column(1));
    if (!value || !parent) continue;
    auto value_index = domain.IndexOf(*value);
    if (!value_index) continue;
    std::string key_text = DumpJson(*parent);
    auto [it, inserted] = link.parent_index.emplace(key_text, static_cast<uint32_t>(link.parent_values.size()));
    if (inserted) {
      link.parent_values.push_back(*parent);
      link.children.emplace_back();
    }
    link.parents[*value_index].push_back(it->second);
    link.children[it->second].push_back(*value_index);
  }
  for (auto& children : link.children) std::sort(children.begin(), children.end());
  domain.links.push_back(std::move(link));
  return Status::Ok();
}

void IndexDomain(Domain& domain) {
  domain.index.clear();
  for (uint32_t i = 0; i < domain.values.size(); ++i) domain.index.emplace(DumpJson(domain.values[i]), i);
}

bool HasType(const Json& schema, const char* type) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const Json& t = schema["type"];
  if (t.is_string()) return t == type;
  if (t.is_array()) {
    for (const auto& item : t) {
      if (item == type) return true;
    }
  }
  return false;
}

// The bounds of an integer schema, when both are given.
std::optional<std::pair<int64_t, int64_t>> IntegerBounds(const Json& schema) {
  auto bound = [&](const char* inclusive, const char* exclusive, bool lower) -> std::optional<int64_t> {
    if (schema.contains(inclusive) && schema[inclusive].is_number()) {
      double v = schema[inclusive].get<double>();
      return static_cast<int64_t>(lower ? std::ceil(v) : std::floor(v));
    }
    if (schema.contains(exclusive) && schema[exclusive].is_number()) {
      double v = schema[exclusive].get<double>();
      return static_cast<int64_t>(lower ? std::floor(v) + 1 : std::ceil(v) - 1);
    }
    return std::nullopt;
  };
  auto lo = bound("minimum", "exclusiveMinimum", true);
  auto hi = bound("maximum", "exclusiveMaximum", false);
  if (!lo || !hi || *lo > *hi) return std::nullopt;
  return std::make_pair(*lo, *hi);
}

class Builder {
 public:
  explicit Builder(Database& db) : db_(db) {}

  // Walks schema and instance together, collecting slots.
  Status Walk(const Json& schema, const Json& instance, const std::string& pointer, const std::string& record) {
    if (!schema.is_object()) return Status::Ok();
    ENVFORGE_ASSIGN_OR_RETURN(std::optional<size_t> domain, DomainOf(schema, pointer));
    if (domain && !instance.is_object() && !instance.is_array()) {
      Slot slot;
      slot.pointer = pointer;
      slot.field = pointer.substr(pointer.rfind('/') == std::string::npos ? 0 : pointer.rfind('/') + 1);
      slot.record = record;
      slot.domain = *domain;
      auto index = domains_[*domain].IndexOf(instance);
      slot.template_value = index ? *index : kNoValue;
      slots_.push_back(std::move(slot));
      return Status::Ok();
    }
    if (instance.is_object() && schema.contains("properties") && schema["properties"].is_object()) {
      for (const auto& [key, property] : schema["properties"].items()) {
        if (!instance.contains(key)) continue;
        ENVFORGE_RETURN_IF_ERROR(Walk(property, instance[key], pointer + "/" + EscapeToken(key), record));
      }
    }
    if (instance.is_array() && schema.contains("items") && schema["items"].is_object()) {
      for (size_t i = 0; i < instance.size(); ++i) {
        std::string element = pointer + "/" + std::to_string(i);
        ENVFORGE_RETURN_IF_ERROR(Walk(schema["items"], instance[i], element, element));
      }
    }
    return Status::Ok();
  }

  std::vector<Slot> TakeSlots() { return std::move(slots_); }
  std::vector<Domain> TakeDomains() { return std::move(domains_); }

 private:
  Result<std::optional<size_t>> DomainOf(const Json& schema, const std::string& pointer) {
    Domain domain;
    if (schema.contains("enum") && schema["enum"].is_array()) {
      domain.source = "enum";
      for (const auto& value : schema["enum"]) {
        if (std::find(domain.values.begin(), domain.values.end(), value) == domain.values.end()) {
          domain.values.push_back(value);
        }
      }
    } else if (schema.contains("const")) {
      domain.source = "const";
      domain.values.push_back(schema["const"]);
    } else if (schema.contains("x-domain")) {
      if (!schema["x-domain"].is_string()) {
        return InvalidArgumentError("answer_schema " + (pointer.empty() ? "/" : pointer) +
                                    ": x-domain must be a string \"table.column\"");
      }
      std::string annotation = schema["x-domain"].get<std::string>();
      if (auto it = cache_.find(annotation); it != cache_.end()) return std::optional<size_t>(it->second);
      auto read = ReadDomain(db_, annotation);
      if (!read.ok()) return read.status().WithContext("answer_schema " + (pointer.empty() ? "/" : pointer));
      domains_.push_back(std::move(read).value());
      cache_[annotation] = domains_.size() - 1;
      return std::optional<size_t>(domains_.size() - 1);
    } else if (HasType(schema, "boolean") && schema["type"].is_string()) {
      domain.source = "boolean";
      domain.values = {false, true};
    } else if (HasType(schema, "integer") && schema["type"].is_string()) {
      auto bounds = IntegerBounds(schema);
      if (!bounds || bounds->second - bounds->first + 1 > kMaxIntegerRange) return std::optional<size_t>();
      domain.source = "integer " + std::to_string(bounds->first) + ".." + std::to_string(bounds->second);
      for (int64_t v = bounds->first; v <= bounds->second; ++v) domain.values.push_back(v);
    } else {
      return std::optional<size_t>();
    }
    std::string key = domain.source + DumpJson(domain.values);
    if (auto it = cache_.find(key); it != cache_.end()) return std::optional<size_t>(it->second);
    IndexDomain(domain);
    domains_.push_back(std::move(domain));
    cache_[key] = domains_.size() - 1;
    return std::optional<size_t>(domains_.size() - 1);
  }

  Database& db_;
  std::vector<Slot> slots_;
  std::vector<Domain> domains_;
  std::map<std::string, size_t> cache_;
};

}  // namespace

std::optional<uint32_t> DomainLink::ParentIndex(const Json& value) const {
  auto it = parent_index.find(DumpJson(value));
  if (it == parent_index.end()) return std::nullopt;
  return it->second;
}

std::optional<uint32_t> Domain::IndexOf(const Json& value) const {
  auto it = index.find(DumpJson(value));
  if (it == index.end()) return std::nullopt;
  return it->second;
}

Result<Database> OpenBundleForDomains(const std::string& envdb_path) {
  return Database::Open(envdb_path, Database::Mode::kReadOnly);
}

Result<Domain> ReadDomain(Database& db, const std::string& annotation) {
  auto dot = annotation.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == annotation.size() ||
      annotation.find('.', dot + 1) != std::string::npos) {
    return InvalidArgumentError("x-domain '" + annotation + "' is not of the form \"table.column\"");
  }
  ENVFORGE_ASSIGN_OR_RETURN(std::string table, ResolveTable(db, annotation.substr(0, dot), annotation));
  ENVFORGE_ASSIGN_OR_RETURN(std::string column, ResolveColumn(db, table, annotation.substr(dot + 1), annotation));
  Domain domain;
  domain.source = table + "." + column;
  auto stmt = db.Prepare("SELECT DISTINCT " + QuoteIdentifier(column) + " FROM " + QuoteIdentifier(table) + " WHERE " +
                         QuoteIdentifier(column) + " IS NOT NULL ORDER BY 1");
  if (!stmt.ok()) return stmt.status();
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    auto value = ToJsonValue(stmt->Column(0));
    if (value) domain.values.push_back(std::move(*value));
  }
  IndexDomain(domain);
  ENVFORGE_ASSIGN_OR_RETURN(auto keys, ForeignKeys(db, table));
  for (const auto& key : keys) {
    if (Lower(key[0]) == Lower(column)) continue;  // the column itself references its parent: no grouping
    ENVFORGE_RETURN_IF_ERROR(ReadLink(db, table, column, key, domain));
  }
  return domain;
}

Json AnswerSpace::Skeleton(const Json& schema) {
  if (!schema.is_object()) return "x";
  if (schema.contains("const")) return schema["const"];
  if (schema.contains("enum") && schema["enum"].is_array() && !schema["enum"].empty()) return schema["enum"][0];
  std::string type;
  if (schema.contains("type")) {
    if (schema["type"].is_string()) {
      type = schema["type"].get<std::string>();
    } else if (schema["type"].is_array() && !schema["type"].empty() && schema["type"][0].is_string()) {
      type = schema["type"][0].get<std::string>();
    }
  } else if (schema.contains("properties")) {
    type = "object";
  } else if (schema.contains("items")) {
    type = "array";
  }
  if (type == "object") {
    Json out = Json::object();
    if (schema.contains("properties") && schema["properties"].is_object()) {
      for (const auto& [key, property] : schema["properties"].items()) out[key] = Skeleton(property);
    }
    return out;
  }
  if (type == "array") {
    Json out = Json::array();
    size_t n = std::max<size_t>(1, schema.value("minItems", size_t{0}));
    for (size_t i = 0; i < n && i < 64; ++i) out.push_back(Skeleton(schema.value("items", Json::object())));
    return out;
  }
  if (type == "integer" || type == "number") {
    if (auto bounds = IntegerBounds(schema)) return bounds->first;
    if (schema.contains("minimum") && schema["minimum"].is_number()) return schema["minimum"];
    return 0;
  }
  if (type == "boolean") return false;
  if (type == "null") return nullptr;
  size_t length = std::max<size_t>(1, schema.value("minLength", size_t{1}));
  return std::string(std::min<size_t>(length, 64), 'x');
}

Result<AnswerSpace> AnswerSpace::Build(Database& db, const Json& schema, const Json& template_answer) {
  AnswerSpace space;
  auto compiled = toolsets::CompiledSchema::Compile(schema);
  if (!compiled.ok()) return compiled.status().WithContext("answer_schema");
  if (!template_answer.is_null() && compiled->Validate(template_answer, 1).empty()) {
    space.template_ = template_answer;
    space.template_is_gold_ = true;
  } else {
    space.template_ = Skeleton(schema);
  }
  Builder builder(db);
  ENVFORGE_RETURN_IF_ERROR(builder.Walk(schema, space.template_, "", ""));
  space.slots_ = builder.TakeSlots();
  space.domains_ = builder.TakeDomains();

  // Drop slots with an empty domain (an x-domain over an empty column): nothing to vary.
  std::erase_if(space.slots_, [&](const Slot& slot) { return space.domains_[slot.domain].values.empty(); });

  // Size, exact while it fits 64 bits.
  space.log10_size_ = 0;
  for (const Slot& slot : space.slots_) {
    uint64_t n = space.domains_[slot.domain].values.size();
    space.log10_size_ += std::log10(static_cast<double>(n));
    if (!space.saturated_ && space.size_ > UINT64_MAX / n) space.saturated_ = true;
    space.size_ = space.saturated_ ? UINT64_MAX : space.size_ * n;
  }

  // Group relations inside a record: child slot's domain links to the parent slot's domain.
  for (size_t child = 0; child < space.slots_.size(); ++child) {
    const Domain& child_domain = space.domains_[space.slots_[child].domain];
    for (size_t link = 0; link < child_domain.links.size(); ++link) {
      for (size_t parent = 0; parent < space.slots_.size(); ++parent) {
        if (parent == child || space.slots_[parent].record != space.slots_[child].record) continue;
        if (space.domains_[space.slots_[parent].domain].source == child_domain.links[link].parent) {
          space.relations_.push_back(SlotRelation{parent, child, link});
        }
      }
    }
  }
  return space;
}

std::vector<uint32_t> AnswerSpace::TemplateChoice() const {
  std::vector<uint32_t> choice;
  choice.reserve(slots_.size());
  for (const Slot& slot : slots_) choice.push_back(slot.template_value);
  return choice;
}

Json AnswerSpace::Make(const std::vector<uint32_t>& choice) const {
  Json answer = template_;
  for (size_t i = 0; i < slots_.size() && i < choice.size(); ++i) {
    if (choice[i] == kNoValue) continue;
    Json::json_pointer pointer(slots_[i].pointer);
    answer[pointer] = domains_[slots_[i].domain].values[choice[i]];
  }
  return answer;
}

std::vector<uint32_t> AnswerSpace::ChoiceAt(uint64_t rank) const {
  std::vector<uint32_t> choice(slots_.size(), 0);
  for (size_t i = slots_.size(); i-- > 0;) {
    uint64_t n = domains_[slots_[i].domain].values.size();
    choice[i] = static_cast<uint32_t>(rank % n);
    rank /= n;
  }
  return choice;
}

}  // namespace envforge::verifiers
