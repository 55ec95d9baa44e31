// Reading SWE-bench shaped instances.
#include "sandbox/code/code_instance.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <sstream>

#include "base/fd.h"

namespace envforge::sandbox::code {
namespace {

const char* const kKnownKeys[] = {
    "instance_id",  "repo",           "base_commit",        "problem_statement", "patch",
    "test_patch",   "FAIL_TO_PASS",   "PASS_TO_PASS",       "language",          "install",
    "test_command", "junit_producer", "test_subset_command"};

bool PlainName(const std::string& name) {
  return !name.empty() && name.size() <= 200 && name != "." && name != ".." &&
         std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '.' || c == '_' || c == '-'; });
}

bool HexCommit(const std::string& commit) {
  return commit.size() >= 7 && commit.size() <= 40 && std::all_of(commit.begin(), commit.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

Result<std::string> StringField(const Json& json, const char* key, bool required, const std::string& where) {
  if (!json.contains(key) || json[key].is_null()) {
    if (required) return InvalidArgumentError(where + ": missing \"" + key + "\"");
    return std::string();
  }
  if (!json[key].is_string()) return InvalidArgumentError(where + ": \"" + key + "\" must be a string");
  return json[key].get<std::string>();
}

// A list of TestIds: a JSON list of strings, or a string holding one (SWE-bench's datasets).
Result<std::vector<std::string>> TestIdList(const Json& json, const char* key, const std::string& where) {
  if (!json.contains(key)) return InvalidArgumentError(where + ": missing \"" + key + "\"");
  Json list = json[key];
  if (list.is_string()) {
    Result<Json> parsed = ParseJson(list.get<std::string>());
    if (!parsed.ok()) return InvalidArgumentError(where + ": \"" + key + "\" is a string that is not a JSON list");
    list = *parsed;
  }
  if (!list.is_array()) return InvalidArgumentError(where + ": \"" + key + "\" must be a list of test ids");
  std::vector<std::string> ids;
  for (const Json& id : list) {
    if (!id.is_string() || id.get<std::string>().empty()) {
      return InvalidArgumentError(where + ": \"" + key + "\" holds an entry that is not a non-empty string");
    }
    ids.push_back(id.get<std::string>());
  }
  return ids;
}

}  // namespace

Json CodeInstance::ToJson() const {
  Json json = extra.is_object() ? extra : Json::object();
  json["instance_id"] = instance_id;
  json["repo"] = repo;
  json["base_commit"] = base_commit;
  json["problem_statement"] = problem_statement;
  json["patch"] = patch;
  json["test_patch"] = test_patch;
  json["FAIL_TO_PASS"] = fail_to_pass;
  json["PASS_TO_PASS"] = pass_to_pass;
  json["language"] = language;
  json["install"] = install;
  json["test_command"] = test_command;
  json["junit_producer"] = junit_producer;
  if (!test_subset_command.empty()) json["test_subset_command"] = test_subset_command;
  return json;
}

Result<CodeInstance> ParseCodeInstance(const Json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgumentError(where + ": an instance must be a JSON object");
  CodeInstance instance;
  ENVFORGE_ASSIGN_OR_RETURN(instance.instance_id, StringField(json, "instance_id", true, where));
  if (!PlainName(instance.instance_id)) {
    return InvalidArgumentError(where + ": instance_id '" + instance.instance_id +
                                "' must be letters, digits, '.', '_' or '-'");
  }
  const std::string at = where + " (" + instance.instance_id + ")";
  ENVFORGE_ASSIGN_OR_RETURN(instance.repo, StringField(json, "repo", false, at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.base_commit, StringField(json, "base_commit", true, at));
  if (!HexCommit(instance.base_commit))
    return InvalidArgumentError(at + ": base_commit '" + instance.base_commit + "' is not a lower-case hex commit id");
  ENVFORGE_ASSIGN_OR_RETURN(instance.problem_statement, StringField(json, "problem_statement", true, at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.patch, StringField(json, "patch", true, at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.test_patch, StringField(json, "test_patch", true, at));
  if (instance.problem_statement.empty()) return InvalidArgumentError(at + ": problem_statement is empty");
  if (DiffPaths(instance.patch).empty())
    return InvalidArgumentError(at + ": patch is not a unified diff (no file in it)");
  ENVFORGE_ASSIGN_OR_RETURN(instance.fail_to_pass, TestIdList(json, "FAIL_TO_PASS", at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.pass_to_pass, TestIdList(json, "PASS_TO_PASS", at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.language, StringField(json, "language", true, at));
  if (std::find(std::begin(kCodeLanguages), std::end(kCodeLanguages), instance.language) == std::end(kCodeLanguages)) {
    return InvalidArgumentError(at + ": language '" + instance.language +
                                "' is not one of python, java, javascript, typescript, c, cpp, go, php");
  }
  ENVFORGE_ASSIGN_OR_RETURN(instance.install, StringField(json, "install", false, at));
  ENVFORGE_ASSIGN_OR_RETURN(instance.test_command, StringField(json, "test_command", true, at));
  if (instance.test_command.empty()) return InvalidArgumentError(at + ": test_command is empty");
  ENVFORGE_ASSIGN_OR_RETURN(std::string producer, StringField(json, "junit_producer", false, at));
  if (!producer.empty()) instance.junit_producer = producer;
  ENVFORGE_ASSIGN_OR_RETURN(instance.test_subset_command, StringField(json, "test_subset_command", false, at));
  for (const auto& [key, value] : json.items()) {
    if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), key) == std::end(kKnownKeys))
      instance.extra[key] = value;
  }
  return instance;
}

Result<std::vector<CodeInstance>> ReadCodeInstances(const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  std::vector<std::pair<Json, std::string>> objects;
  if (Result<Json> whole = ParseJson(text); whole.ok()) {
    if (whole->is_array()) {
      for (size_t i = 0; i < whole->size(); ++i)
        objects.emplace_back((*whole)[i], path + " item " + std::to_string(i + 1));
    } else {
      objects.emplace_back(*whole, path);
    }
  } else {
    std::istringstream lines(text);
    std::string line;
    for (int number = 1; std::getline(lines, line); ++number) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Result<Json> parsed = ParseJson(line);
      if (!parsed.ok())
        return InvalidArgumentError(path + " line " + std::to_string(number) +
                                    ": not JSON: " + parsed.status().message());
      objects.emplace_back(*parsed, path + " line " + std::to_string(number));
    }
  }
  if (objects.empty()) return InvalidArgumentError(path + ": no instance in it");
  std::vector<CodeInstance> instances;
  std::set<std::string> seen;
  for (const auto& [json, where] : objects) {
    ENVFORGE_ASSIGN_OR_RETURN(CodeInstance instance, ParseCodeInstance(json, where));
    if (!seen.insert(instance.instance_id).second)
      return InvalidArgumentError(where + ": instance_id " + instance.instance_id + " appears twice");
    instances.push_back(std::move(instance));
  }
  return instances;
}

std::vector<std::string> DiffPaths(const std::string& diff) {
  std::vector<std::string> paths;
  std::istringstream lines(diff);
  std::string line, minus;
  while (std::getline(lines, line)) {
    if (line.starts_with("--- ")) minus = line.substr(4);
    if (!line.starts_with("+++ ")) continue;
    std::string plus = line.substr(4);
    std::string chosen = plus == "/dev/null" ? minus : plus;
    if (const size_t tab = chosen.find('\t'); tab != std::string::npos) chosen.resize(tab);
    if (chosen.starts_with("a/") || chosen.starts_with("b/")) chosen = chosen.substr(2);
    if (!chosen.empty() && chosen != "/dev/null" && std::find(paths.begin(), paths.end(), chosen) == paths.end())
      paths.push_back(chosen);
  }
  return paths;
}

}  // namespace envforge::sandbox::code
