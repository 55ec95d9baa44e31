// Packing and reading search bundles (sandbox/search_bundle.h).
//
// Order of work, as for every pack: read and check every source (collecting problems), then,
// with none left, write the reserved tables and _files, hash, and set the task versions.
#include "sandbox/search_bundle.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <set>
#include <variant>
#include <vector>

#include "base/fd.h"
#include "base/sqlite.h"
#include "sandbox/env_bundle.h"
#include "sandbox/internal/bundle_format.h"
#include "toolsets/search/corpus_store.h"
#include "toolsets/search/solution_path.h"
#include "toolsets/search_tools.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;

constexpr const char* kAnswersDir = "search/answers/";
constexpr const char* kSolutionsDir = "search/solutions/";

struct SearchTaskSource {
  std::string id;
  std::string prompt;
  search::AnswerKey key;
  int64_t difficulty = 1;
  Json knobs = Json::object();
  std::optional<Json> solution;  // tasks/<id>/solution.json, checked (search/solution_path.h)
};

struct SearchSources {
  Json env;                             // env.json, checked
  Json backend;                         // search.json or the default, checked, corpus rewritten to kCorpusFilePath
  std::string corpus_image;             // offline: the corpus database, serialized
  std::vector<SearchTaskSource> tasks;  // sorted by id
};

bool IsValidId(const std::string& id) {
  auto allowed = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-'; };
  return !id.empty() && std::all_of(id.begin(), id.end(), allowed) && id != "." && id != "..";
}

bool IsIgnoredName(const std::string& name) { return name.starts_with(".") || name == "__pycache__"; }

// The JSON of a source file; a problem (and nullopt) when it is missing or malformed.
std::optional<Json> ReadJsonSource(const fs::path& root, const std::string& rel, std::vector<std::string>* problems) {
  Result<std::string> text = ReadFileToString((root / rel).string());
  if (!text.ok()) {
    problems->push_back(rel + ": " +
                        (text.status().code() == StatusCode::kNotFound ? "missing" : text.status().message()));
    return std::nullopt;
  }
  Result<Json> json = ParseJson(*text, rel);
  if (!json.ok()) {
    problems->push_back(rel + ": " + json.status().message());
    return std::nullopt;
  }
  return std::move(*json);
}

void CheckEnvJson(const fs::path& root, SearchSources* sources, std::vector<std::string>* problems) {
  std::optional<Json> env = ReadJsonSource(root, "env.json", problems);
  if (!env) return;
  if (!env->is_object()) {
    problems->push_back("env.json: must be a JSON object");
    return;
  }
  size_t before = problems->size();
  auto problem = [&](const std::string& message) { problems->push_back("env.json: " + message); };
  for (const auto& [key, value] : env->items()) {
    static const std::set<std::string> kKnown = {"name", "kind", "category", "description", "provenance"};
    if (!kKnown.contains(key))
      problem("unknown key '" + key + "' (allowed: name, kind, category, description, provenance)");
  }
  for (const char* key : {"name", "category", "description"}) {
    auto it = env->find(key);
    if (it == env->end() || !it->is_string()) {
      problem(std::string("'") + key + "' must be a string");
    } else if (std::string(key) != "description" && it->get_ref<const std::string&>().empty()) {
      problem(std::string("'") + key + "' must not be empty");
    }
  }
  if (auto name = env->find("name"); name != env->end() && name->is_string() && !IsValidId(name->get<std::string>())) {
    problem("name '" + name->get<std::string>() + "' must match [A-Za-z0-9_.-]+");
  }
  if (auto provenance = env->find("provenance"); provenance != env->end() && !provenance->is_object()) {
    problem("'provenance' must be a JSON object");
  }
  if (problems->size() == before) sources->env = std::move(*env);
}

// search.json (or the offline default) and, offline, the corpus it names.
void ReadBackend(const fs::path& root, uint64_t max_bytes, SearchSources* sources, std::vector<std::string>* problems) {
  std::error_code ec;
  Json config = {{"backend", "offline"}, {"corpus", "corpus.sqlite"}};
  if (fs::exists(root / "search.json", ec)) {
    std::optional<Json> read = ReadJsonSource(root, "search.json", problems);
    if (!read) return;
    config = std::move(*read);
  }
  Result<search::SearchBackendConfig> parsed = search::ParseSearchConfig(config);
  if (!parsed.ok()) {
    problems->push_back("search.json: " + parsed.status().message());
    return;
  }
  if (parsed->backend == "offline") {
    const std::string rel = parsed->corpus;
    const fs::path corpus = fs::path(rel).is_absolute() ? fs::path(rel) : root / rel;
    Result<std::unique_ptr<search::CorpusReader>> reader = search::CorpusReader::Open(corpus.string());
    Result<search::CorpusInfo> info = reader.ok() ? (*reader)->Info() : Result<search::CorpusInfo>(reader.status());
    if (!info.ok()) {
      problems->push_back(rel + ": " + info.status().message());
      return;
    }
    if (info->documents == 0) {
      problems->push_back(rel + ": the corpus holds no document");
      return;
    }
    Result<std::string> image = (*reader)->database().Serialize();
    if (!image.ok()) {
      problems->push_back(rel + ": " + image.status().message());
      return;
    }
    if (image->size() > max_bytes) {
      problems->push_back(rel + ": " + std::to_string(image->size()) + " bytes: the size budget of " +
                          std::to_string(max_bytes) + " bytes (--max-bytes) does not hold the corpus");
      return;
    }
    sources->corpus_image = std::move(*image);
    parsed->corpus = kCorpusFilePath;
  }
  sources->backend = search::ToJson(*parsed);
}

void CheckTaskJson(const std::string& rel, const Json& json, SearchTaskSource* task,
                   std::vector<std::string>* problems) {
  auto problem = [&](const std::string& message) { problems->push_back(rel + ": " + message); };
  if (!json.is_object()) return problem("must be a JSON object");
  static const std::set<std::string> kKnown = {"prompt", "answer", "aliases", "difficulty", "knobs"};
  for (const auto& [key, value] : json.items()) {
    if (!kKnown.contains(key))
      problem("unknown key '" + key + "' (allowed: prompt, answer, aliases, difficulty, knobs)");
  }
  auto prompt = json.find("prompt");
  if (prompt == json.end() || !prompt->is_string() ||
      std::all_of(prompt->get_ref<const std::string&>().begin(), prompt->get_ref<const std::string&>().end(),
                  [](unsigned char c) { return std::isspace(c); })) {
    problem("'prompt' must be a non-empty string (the question)");
  } else {
    task->prompt = prompt->get<std::string>();
  }
  Json key_json = Json::object();
  if (auto answer = json.find("answer"); answer != json.end()) key_json["answer"] = *answer;
  if (auto aliases = json.find("aliases"); aliases != json.end()) key_json["aliases"] = *aliases;
  Result<search::AnswerKey> key = search::AnswerKeyFromJson(key_json);
  if (!key.ok()) {
    problem(key.status().message());
  } else {
    task->key = std::move(*key);
  }
  if (auto difficulty = json.find("difficulty"); difficulty != json.end()) {
    if (!difficulty->is_number_integer() || difficulty->get<int64_t>() < 1 || difficulty->get<int64_t>() > 5) {
      problem("'difficulty' must be an integer from 1 to 5, got " + DumpJson(*difficulty));
    } else {
      task->difficulty = difficulty->get<int64_t>();
    }
  }
  if (auto knobs = json.find("knobs"); knobs != json.end()) {
    if (!knobs->is_object()) {
      problem("'knobs' must be a JSON object");
    } else {
      task->knobs = *knobs;
    }
  }
}

void ReadTasks(const fs::path& root, SearchSources* sources, std::vector<std::string>* problems) {
  std::error_code ec;
  if (!fs::is_directory(root / "tasks", ec)) {
    problems->push_back("tasks: missing: a search environment needs at least one tasks/<id>/task.json");
    return;
  }
  std::vector<std::string> ids;
  for (fs::directory_iterator it(root / "tasks", ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (IsIgnoredName(name)) continue;
    if (!it->is_directory(ec) || it->is_symlink(ec)) {
      problems->push_back("tasks/" + name + ": not a task directory (tasks/ holds only tasks/<id>/ directories)");
    } else if (!IsValidId(name)) {
      problems->push_back("tasks/" + name + ": task id '" + name + "' must match [A-Za-z0-9_.-]+");
    } else {
      ids.push_back(name);
    }
  }
  std::sort(ids.begin(), ids.end());
  if (ids.empty()) problems->push_back("tasks: holds no task");
  for (const std::string& id : ids) {
    const std::string dir = "tasks/" + id;
    for (fs::directory_iterator it(root / dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (IsIgnoredName(name) || name == "task.json" || name == "solution.json") continue;
      problems->push_back(dir + "/" + name +
                          ": unexpected entry (a search task is its task.json and an optional solution.json: the "
                          "runtime solves and judges it)");
    }
    SearchTaskSource task;
    task.id = id;
    if (std::optional<Json> json = ReadJsonSource(root, dir + "/task.json", problems)) {
      CheckTaskJson(dir + "/task.json", *json, &task, problems);
    }
    if (fs::exists(fs::symlink_status(root / dir / "solution.json", ec))) {
      if (std::optional<Json> json = ReadJsonSource(root, dir + "/solution.json", problems)) {
        Result<search::SolutionPath> path = search::SolutionPathFromJson(*json);
        if (!path.ok()) {
          problems->push_back(dir + "/solution.json: " + path.status().message());
        } else {
          task.solution = search::ToJson(*path);
        }
      }
    }
    sources->tasks.push_back(std::move(task));
  }
}

void RefuseGeneralEntries(const fs::path& root, std::vector<std::string>* problems) {
  std::error_code ec;
  for (const char* entry : {"tools.py", "schema.sql", "files"}) {
    if (fs::exists(fs::symlink_status(root / entry, ec))) {
      problems->push_back(std::string(entry) +
                          ": a search environment has none (its tools are the runtime's search, open and find; its "
                          "documents are the corpus)");
    }
  }
}

Status Insert(Database& db, std::string_view sql, const std::vector<SqlValue>& values) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll(values));
  return stmt.Run();
}

SqlValue Blob(std::string_view bytes) { return std::vector<uint8_t>(bytes.begin(), bytes.end()); }

Status WriteBundle(Database& db, const SearchSources& sources, const Json& provenance) {
  ENVFORGE_RETURN_IF_ERROR(db.Exec(internal::kReservedTablesSql));
  constexpr std::string_view kEnvSql = "INSERT INTO _env(key, value) VALUES(?, ?)";
  for (const char* key : {"name", "category", "description"}) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string(key), sources.env.at(key).get<std::string>()}));
  }
  for (const auto& [key, value] :
       std::vector<std::pair<std::string, std::string>>{{"kind", "search"},
                                                        {"format_version", std::to_string(kBundleFormatVersion)},
                                                        {"provenance", DumpJson(provenance)},
                                                        {"tools_module", ""}}) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {key, value}));
  }
  std::vector<toolsets::ToolSpec> tools = toolsets::SearchToolSpecs();
  tools.push_back(toolsets::SubmitResultSpec());
  for (size_t i = 0; i < tools.size(); ++i) {
    ENVFORGE_RETURN_IF_ERROR(
        Insert(db, "INSERT INTO _tools VALUES (?, ?, ?, ?, '', 1)",
               {static_cast<int64_t>(i), tools[i].name, tools[i].description, DumpJson(tools[i].input_schema)}));
  }
  for (const SearchTaskSource& task : sources.tasks) {
    ENVFORGE_RETURN_IF_ERROR(Insert(
        db,
        "INSERT INTO _tasks(id, prompt, answer_schema, solution_source, verifier_source,"
        " oracle_source, difficulty, knobs, version) VALUES(?, ?, ?, '', '', NULL, ?, ?, '')",
        {task.id, task.prompt, DumpJson(toolsets::SearchAnswerSchema()), task.difficulty, DumpJson(task.knobs)}));
    ENVFORGE_RETURN_IF_ERROR(Insert(db, "INSERT INTO _files(path, data) VALUES(?, ?)",
                                    {kAnswersDir + task.id + ".json", Blob(DumpJson(search::ToJson(task.key)))}));
    if (task.solution) {
      ENVFORGE_RETURN_IF_ERROR(Insert(db, "INSERT INTO _files(path, data) VALUES(?, ?)",
                                      {kSolutionsDir + task.id + ".json", Blob(DumpJson(*task.solution))}));
    }
  }
  ENVFORGE_RETURN_IF_ERROR(Insert(db, "INSERT INTO _files(path, data) VALUES(?, ?)",
                                  {std::string(kSearchBackendFilePath), Blob(DumpJson(sources.backend))}));
  if (!sources.corpus_image.empty()) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, "INSERT INTO _files(path, data) VALUES(?, ?)",
                                    {std::string(kCorpusFilePath), Blob(sources.corpus_image)}));
  }
  // The content hash, then every task's version from it (versions are outside the hash).
  ENVFORGE_ASSIGN_OR_RETURN(std::string hash, internal::ContentHashOf(db));
  ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string("content_hash"), hash}));
  for (const SearchTaskSource& task : sources.tasks) {
    TaskRecord record;
    record.prompt = task.prompt;
    ENVFORGE_RETURN_IF_ERROR(
        Insert(db, "UPDATE _tasks SET version = ? WHERE id = ?", {TaskVersion(hash, record), task.id}));
  }
  return Status::Ok();
}

// The bytes of one _files entry; NotFound when absent.
Result<std::string> ReadBundleFile(Database& db, const std::string& envdb_path, const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare("SELECT data FROM _files WHERE path = ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({path}));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return NotFoundError(envdb_path + " holds no " + path);
  SqlValue value = stmt.Column(0);
  if (const auto* blob = std::get_if<std::vector<uint8_t>>(&value)) return std::string(blob->begin(), blob->end());
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  return DataLossError(envdb_path + ": _files " + path + " is neither a blob nor text");
}

Result<Database> OpenBundle(const std::string& envdb_path) {
  std::error_code ec;
  if (!fs::exists(envdb_path, ec)) return NotFoundError(envdb_path + ": no such bundle");
  return Database::Open(envdb_path, Database::Mode::kReadOnly);
}

}  // namespace

bool IsSearchEnvironmentSource(const std::string& source_dir) {
  Result<std::string> text = ReadFileToString((fs::path(source_dir) / "env.json").string());
  if (!text.ok()) return false;
  Result<Json> env = ParseJson(*text, "env.json");
  return env.ok() && env->is_object() && env->value("kind", Json()) == "search";
}

Status PackSearchEnvironmentInto(const std::string& source_dir, const std::string& bundle_path, const Json& provenance,
                                 uint64_t max_bytes) {
  const fs::path root(source_dir);
  std::vector<std::string> problems;
  SearchSources sources;
  CheckEnvJson(root, &sources, &problems);
  RefuseGeneralEntries(root, &problems);
  ReadBackend(root, max_bytes, &sources, &problems);
  ReadTasks(root, &sources, &problems);
  if (!problems.empty()) {
    std::sort(problems.begin(), problems.end());
    std::string message = "cannot pack " + source_dir + ": " + std::to_string(problems.size()) +
                          (problems.size() == 1 ? " problem" : " problems");
    for (const std::string& problem : problems) message += "\n" + problem;
    return InvalidArgumentError(std::move(message));
  }
  Json merged = sources.env.value("provenance", Json::object());
  for (const auto& [key, value] : provenance.items()) merged[key] = value;
  if (!provenance.contains("source_dir")) merged["source_dir"] = fs::absolute(root).lexically_normal().string();

  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(bundle_path, Database::Mode::kReadWrite));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF; BEGIN"));
  ENVFORGE_RETURN_IF_ERROR(WriteBundle(db, sources, merged));
  return db.Exec("COMMIT");
}

Result<SearchBundle> LoadSearchBundle(const std::string& envdb_path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenBundle(envdb_path));
  SearchBundle bundle;
  Result<std::string> backend_text = ReadBundleFile(db, envdb_path, kSearchBackendFilePath);
  if (!backend_text.ok()) return DataLossError(backend_text.status().message() + " (not a search bundle?)");
  Result<Json> backend_json = ParseJson(*backend_text, kSearchBackendFilePath);
  Result<search::SearchBackendConfig> backend = backend_json.ok()
                                                    ? search::ParseSearchConfig(*backend_json)
                                                    : Result<search::SearchBackendConfig>(backend_json.status());
  if (!backend.ok())
    return DataLossError(envdb_path + ": " + kSearchBackendFilePath + ": " + backend.status().message());
  bundle.backend = std::move(*backend);
  ENVFORGE_ASSIGN_OR_RETURN(Statement tasks, db.Prepare("SELECT id FROM _tasks ORDER BY id"));
  std::vector<std::string> ids;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, tasks.Step());
    if (!row) break;
    ids.push_back(tasks.ColumnText(0));
  }
  for (const std::string& id : ids) {
    const std::string path = kAnswersDir + id + ".json";
    Result<std::string> text = ReadBundleFile(db, envdb_path, path);
    Result<Json> json = text.ok() ? ParseJson(*text, path) : Result<Json>(text.status());
    Result<search::AnswerKey> key =
        json.ok() ? search::AnswerKeyFromJson(*json) : Result<search::AnswerKey>(json.status());
    if (!key.ok()) return DataLossError(envdb_path + ": task '" + id + "': answer key: " + key.status().message());
    bundle.answers.emplace(id, std::move(*key));
    const std::string solution_path = kSolutionsDir + id + ".json";
    Result<std::string> solution_text = ReadBundleFile(db, envdb_path, solution_path);
    if (!solution_text.ok() && solution_text.status().code() == StatusCode::kNotFound) continue;
    Result<Json> solution_json =
        solution_text.ok() ? ParseJson(*solution_text, solution_path) : Result<Json>(solution_text.status());
    Result<search::SolutionPath> solution = solution_json.ok() ? search::SolutionPathFromJson(*solution_json)
                                                               : Result<search::SolutionPath>(solution_json.status());
    if (!solution.ok())
      return DataLossError(envdb_path + ": task '" + id + "': solution path: " + solution.status().message());
    bundle.solutions.emplace(id, std::move(*solution));
  }
  return bundle;
}

Status ExtractSearchCorpus(const std::string& envdb_path, const std::string& path) {
  ENVFORGE_ASSIGN_OR_RETURN(Database db, OpenBundle(envdb_path));
  ENVFORGE_ASSIGN_OR_RETURN(std::string corpus, ReadBundleFile(db, envdb_path, kCorpusFilePath));
  return WriteFileAtomically(path, corpus);
}

}  // namespace envforge::sandbox
