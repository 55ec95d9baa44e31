#include "envsynth/proposer.h"

#include "base/sha256.h"

namespace envforge::envsynth {

std::string TaskDraft::ArtifactHash() const {
  Sha256 hash;
  std::vector<std::string> parts = {id, prompt, DumpJson(answer_schema), DumpJson(knobs), solution, verifier, oracle};
  for (const auto& [name, source] : new_tools) {
    parts.push_back(name);
    parts.push_back(source);
  }
  for (const std::string& part : parts) {
    hash.Update(std::to_string(part.size()) + ":");
    hash.Update(part);
  }
  return hash.FinishHex();
}

namespace {

Json PairsToJson(const std::vector<std::pair<std::string, std::string>>& pairs) {
  Json out = Json::array();
  for (const auto& [name, source] : pairs) out.push_back({{"name", name}, {"source", source}});
  return out;
}

std::vector<std::pair<std::string, std::string>> PairsFromJson(const Json& json) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Json& item : json)
    out.emplace_back(item.at("name").get<std::string>(), item.at("source").get<std::string>());
  return out;
}

}  // namespace

Json EnvironmentDraft::ToJson() const {
  return {{"category", category},
          {"seed", seed},
          {"name", name},
          {"description", description},
          {"schema_sql", schema_sql},
          {"preamble", preamble},
          {"tools", PairsToJson(tools)},
          {"base_tools", base_tools},
          {"attempt", attempt}};
}

Result<EnvironmentDraft> EnvironmentDraft::FromJson(const Json& json) {
  EnvironmentDraft d;
  try {
    d.category = json.at("category").get<std::string>();
    d.seed = json.at("seed").get<uint64_t>();
    d.name = json.at("name").get<std::string>();
    d.description = json.at("description").get<std::string>();
    d.schema_sql = json.at("schema_sql").get<std::string>();
    d.preamble = json.at("preamble").get<std::string>();
    d.tools = PairsFromJson(json.at("tools"));
    d.base_tools = json.at("base_tools").get<std::vector<std::string>>();
    d.attempt = json.value("attempt", int64_t{0});
  } catch (const Json::exception& error) {
    return DataLossError(std::string("stored environment draft: ") + error.what());
  }
  return d;
}

Json TaskDraft::ToJson() const {
  return {{"id", id},
          {"lineage", lineage},
          {"level", level},
          {"difficulty", difficulty},
          {"attempt", attempt},
          {"prompt", prompt},
          {"answer_schema", answer_schema},
          {"knobs", knobs},
          {"solution", solution},
          {"verifier", verifier},
          {"oracle", oracle},
          {"tools", tools},
          {"new_tools", PairsToJson(new_tools)}};
}

Result<TaskDraft> TaskDraft::FromJson(const Json& json) {
  TaskDraft d;
  try {
    d.id = json.at("id").get<std::string>();
    d.lineage = json.at("lineage").get<int64_t>();
    d.level = json.at("level").get<int64_t>();
    d.difficulty = json.at("difficulty").get<int64_t>();
    d.attempt = json.at("attempt").get<int64_t>();
    d.prompt = json.at("prompt").get<std::string>();
    d.answer_schema = json.at("answer_schema");
    d.knobs = json.at("knobs");
    d.solution = json.at("solution").get<std::string>();
    d.verifier = json.at("verifier").get<std::string>();
    d.oracle = json.at("oracle").get<std::string>();
    d.tools = json.at("tools").get<std::vector<std::string>>();
    d.new_tools = PairsFromJson(json.value("new_tools", Json::array()));
  } catch (const Json::exception& error) {
    return DataLossError(std::string("stored task draft: ") + error.what());
  }
  return d;
}

}  // namespace envforge::envsynth
