// Packing a source directory into a bundle (sandbox/env_pack.h).
//
// Order of work: read and check every source (collecting problems), run schema.sql into the
// temporary file (its problems join the list), run `envforge-worker analyze` (its problems join
// the list), check the tool specs; then, with no problem left, fill the reserved tables, hash,
// VACUUM, load the result back as a self-check, fsync and rename. The temporary file is owned by
// a guard that unlinks it on every early return.
#include "sandbox/env_pack.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <set>
#include <string_view>

#include "base/cleanup_registry.h"
#include "base/fd.h"
#include "base/sqlite.h"
#include "base/subprocess.h"
#include "sandbox/env_bundle.h"
#include "sandbox/internal/bundle_format.h"
#include "sandbox/search_bundle.h"
#include "sandbox/worker_locator.h"
#include "toolsets/interpreter_tools.h"
#include "toolsets/json_schema.h"
#include "toolsets/tool_protocol.h"

namespace envforge::sandbox {
namespace {

namespace fs = std::filesystem;

// ---- Problems -----------------------------------------------------------------------------------

struct Problem {
  std::string path;  // relative to the source directory
  int line = 0;      // 1-based; 0 when unknown
  std::string message;
};

class Problems {
 public:
  void Add(std::string path, int line, std::string message) {
    list_.push_back(Problem{std::move(path), line, std::move(message)});
  }
  bool empty() const { return list_.empty(); }
  const std::vector<Problem>& list() const { return list_; }
  bool Mentions(std::string_view path) const {
    return std::any_of(list_.begin(), list_.end(), [&](const Problem& p) { return p.path == path; });
  }
  Status ToStatus(const std::string& source_dir) {
    std::stable_sort(list_.begin(), list_.end(), [](const Problem& a, const Problem& b) {
      return a.path != b.path ? a.path < b.path : a.line < b.line;
    });
    std::string message = "cannot pack " + source_dir + ": " + std::to_string(list_.size()) +
                          (list_.size() == 1 ? " problem" : " problems");
    for (const Problem& p : list_) {
      message += "\n" + p.path;
      if (p.line > 0) message += ":" + std::to_string(p.line);
      message += ": " + p.message;
    }
    return InvalidArgumentError(std::move(message));
  }

 private:
  std::vector<Problem> list_;
};

// ---- Small helpers ------------------------------------------------------------------------------

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t extra = 0;
    uint32_t code = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      code = c & 0x07;
    } else
      return false;
    if (i + extra >= text.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMin[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return false;
    i += extra + 1;
  }
  return true;
}

int LineOfOffset(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n'));
}

// The line of `"key"` followed by ':' in a JSON text (first occurrence), 0 when not found.
int LineOfJsonKey(std::string_view text, std::string_view key) {
  std::string quoted = "\"" + std::string(key) + "\"";
  for (size_t at = text.find(quoted); at != std::string_view::npos; at = text.find(quoted, at + 1)) {
    size_t after = at + quoted.size();
    while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
    if (after < text.size() && text[after] == ':') return LineOfOffset(text, at);
  }
  return 0;
}

bool IsValidId(const std::string& id) {
  auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
  };
  return !id.empty() && std::all_of(id.begin(), id.end(), allowed) && id != "." && id != "..";
}

bool IsIgnoredName(const std::string& name) { return name.starts_with(".") || name == "__pycache__"; }

// The bytes of sources and files/ read so far against the size budget: everything read ends up in
// the bundle, so it is measured (stat) before it is read.
struct ReadBudget {
  uint64_t max_bytes = 0;
  uint64_t used = 0;
  bool exhausted = false;
  // Records a problem and returns false when `rel` (of `size` bytes) does not fit what is left.
  bool Take(const std::string& rel, uint64_t size, Problems* problems) {
    if (exhausted) return false;  // reported once, at the first file past it
    if (size > max_bytes - std::min(used, max_bytes)) {
      exhausted = true;
      problems->Add(rel, 0,
                    std::to_string(size) + " bytes: the size budget of " + std::to_string(max_bytes) +
                        " bytes (--max-bytes) was spent reading the sources (" + std::to_string(used) +
                        " bytes before this file)");
      return false;
    }
    used += size;
    return true;
  }
};

// Reads a text source; records a problem (and returns nullopt) when it is missing, not UTF-8, or
// past the size budget.
std::optional<std::string> ReadSource(const fs::path& root, const std::string& rel, Problems* problems,
                                      ReadBudget* budget, bool required = true) {
  std::error_code ec;
  fs::path full = root / rel;
  if (!fs::exists(full, ec)) {
    if (required) problems->Add(rel, 0, "missing");
    return std::nullopt;
  }
  if (!fs::is_regular_file(full, ec)) {
    problems->Add(rel, 0, "not a regular file");
    return std::nullopt;
  }
  uintmax_t size = fs::file_size(full, ec);
  if (!ec && !budget->Take(rel, size, problems)) return std::nullopt;
  auto text = ReadFileToString(full.string());
  if (!text.ok()) {
    problems->Add(rel, 0, text.status().message());
    return std::nullopt;
  }
  if (!IsValidUtf8(*text)) {
    problems->Add(rel, 0, "not valid UTF-8 text");
    return std::nullopt;
  }
  return std::move(*text);
}

std::optional<Json> ParseJsonSource(const std::string& rel, const std::string& text, Problems* problems) {
  if (Status depth = CheckJsonTextDepth(text, kMaxJsonDepth, "the file"); !depth.ok()) {
    problems->Add(rel, 0, depth.message());
    return std::nullopt;
  }
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& error) {
    problems->Add(rel, LineOfOffset(text, error.byte > 0 ? error.byte - 1 : 0),
                  "invalid JSON: " + std::string(error.what()));
  }
  return std::nullopt;
}

// ---- Reading the sources ------------------------------------------------------------------------

struct TaskSource {
  std::string id;
  Json spec;  // task.json, checked
  std::optional<std::string> solution, verifier, oracle;
  bool valid = false;
};

struct Sources {
  Json env;
  std::optional<std::string> schema_sql;
  std::optional<std::string> tools_py;
  std::vector<TaskSource> tasks;                           // sorted by id
  std::vector<std::pair<std::string, std::string>> files;  // (path below files/, bytes)

  // env.json says kind "interpreter" (false while env.json is missing or malformed).
  bool interpreter() const {
    auto kind = env.is_object() ? env.find("kind") : env.end();
    return env.is_object() && kind != env.end() && *kind == "interpreter";
  }
};

void CheckEnvJson(const fs::path& root, Sources* sources, Problems* problems, ReadBudget* budget) {
  const std::string rel = "env.json";
  auto text = ReadSource(root, rel, problems, budget);
  if (!text) return;
  auto json = ParseJsonSource(rel, *text, problems);
  if (!json) return;
  if (!json->is_object()) {
    problems->Add(rel, 1, "must be a JSON object");
    return;
  }
  static const std::set<std::string> kKnown = {"name", "kind", "category", "description", "provenance"};
  for (const auto& [key, value] : json->items()) {
    if (!kKnown.contains(key)) {
      problems->Add(rel, LineOfJsonKey(*text, key),
                    "unknown key '" + key + "' (allowed: name, kind, category, description, provenance)");
    }
  }
  bool ok = true;
  auto require_string = [&](const char* key, bool non_empty) -> const std::string* {
    auto it = json->find(key);
    if (it == json->end()) {
      problems->Add(rel, 0, std::string("missing required string field '") + key + "'");
    } else if (!it->is_string()) {
      problems->Add(rel, LineOfJsonKey(*text, key), std::string("'") + key + "' must be a string");
    } else if (non_empty && it->get_ref<const std::string&>().empty()) {
      problems->Add(rel, LineOfJsonKey(*text, key), std::string("'") + key + "' must not be empty");
    } else {
      return &it->get_ref<const std::string&>();
    }
    ok = false;
    return nullptr;
  };
  if (const std::string* name = require_string("name", true); name && !IsValidId(*name)) {
    problems->Add(rel, LineOfJsonKey(*text, "name"), "name '" + *name + "' must match [A-Za-z0-9_.-]+");
    ok = false;
  }
  static const std::set<std::string> kKinds = {"general", "code", "search", "interpreter"};
  if (const std::string* kind = require_string("kind", true); kind && !kKinds.contains(*kind)) {
    problems->Add(rel, LineOfJsonKey(*text, "kind"),
                  "kind '" + *kind + "' is not one of general, code, search, interpreter");
    ok = false;
  }
  require_string("category", true);
  require_string("description", false);
  if (auto it = json->find("provenance"); it != json->end() && !it->is_object()) {
    problems->Add(rel, LineOfJsonKey(*text, "provenance"), "'provenance' must be a JSON object");
    ok = false;
  }
  if (ok) sources->env = std::move(*json);
}

void CheckTaskJson(const std::string& rel, const std::string& text, TaskSource* task, Problems* problems) {
  auto json = ParseJsonSource(rel, text, problems);
  if (!json) return;
  if (!json->is_object()) {
    problems->Add(rel, 1, "must be a JSON object");
    return;
  }
  bool ok = true;
  auto problem = [&](std::string_view key, std::string message) {
    problems->Add(rel, key.empty() ? 0 : LineOfJsonKey(text, key), std::move(message));
    ok = false;
  };
  static const std::set<std::string> kKnown = {"prompt", "answer_schema", "difficulty", "knobs"};
  for (const auto& [key, value] : json->items()) {
    if (!kKnown.contains(key))
      problem(key, "unknown key '" + key + "' (allowed: prompt, answer_schema, difficulty, knobs)");
  }
  for (const char* key : {"prompt", "answer_schema", "difficulty", "knobs"}) {
    if (!json->contains(key)) problem("", std::string("missing required field '") + key + "'");
  }
  if (auto it = json->find("prompt"); it != json->end()) {
    bool blank = !it->is_string() ||
                 std::all_of(it->get_ref<const std::string&>().begin(), it->get_ref<const std::string&>().end(),
                             [](unsigned char c) { return std::isspace(c); });
    if (blank) problem("prompt", "'prompt' must be a non-empty string");
  }
  if (auto it = json->find("answer_schema"); it != json->end()) {
    if (!it->is_object()) {
      problem("answer_schema", "'answer_schema' must be a JSON Schema object");
    } else if (Status schema = toolsets::CheckSchema(*it); !schema.ok()) {
      problem("answer_schema", "answer_schema: " + schema.message());
    }
  }
  if (auto it = json->find("difficulty"); it != json->end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 || it->get<int64_t>() > 5) {
      problem("difficulty", "'difficulty' must be an integer from 1 to 5, got " + DumpJson(*it));
    }
  }
  if (auto it = json->find("knobs"); it != json->end() && !it->is_object()) {
    problem("knobs", "'knobs' must be a JSON object");
  }
  if (ok) task->spec = std::move(*json);
  task->valid = ok;
}

void ReadTasks(const fs::path& root, Sources* sources, Problems* problems, ReadBudget* budget) {
  std::error_code ec;
  fs::path tasks_dir = root / "tasks";
  if (!fs::is_directory(tasks_dir, ec)) {
    problems->Add("tasks", 0, "missing: an environment needs at least one task directory tasks/<id>/");
    return;
  }
  std::vector<std::string> ids;
  for (fs::directory_iterator it(tasks_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (IsIgnoredName(name)) continue;
    if (!it->is_directory(ec) || it->is_symlink(ec)) {
      problems->Add("tasks/" + name, 0, "not a task directory (tasks/ holds only tasks/<id>/ directories)");
      continue;
    }
    ids.push_back(name);
  }
  if (ec) problems->Add("tasks", 0, "cannot list: " + ec.message());
  std::sort(ids.begin(), ids.end());
  if (ids.empty() && !ec) problems->Add("tasks", 0, "holds no task");
  static const std::set<std::string> kTaskFiles = {"task.json", "solution.py", "verifier.py", "oracle.py"};
  for (const std::string& id : ids) {
    std::string dir = "tasks/" + id;
    if (!IsValidId(id)) {
      problems->Add(dir, 0, "task id '" + id + "' must match [A-Za-z0-9_.-]+");
      continue;
    }
    for (fs::directory_iterator it(root / dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (IsIgnoredName(name) || kTaskFiles.contains(name)) continue;
      problems->Add(
          dir + "/" + name, 0,
          "unexpected entry (a task directory holds task.json, solution.py, verifier.py and optionally oracle.py)");
    }
    TaskSource task;
    task.id = id;
    if (auto text = ReadSource(root, dir + "/task.json", problems, budget))
      CheckTaskJson(dir + "/task.json", *text, &task, problems);
    task.solution = ReadSource(root, dir + "/solution.py", problems, budget);
    task.verifier = ReadSource(root, dir + "/verifier.py", problems, budget);
    task.oracle = ReadSource(root, dir + "/oracle.py", problems, budget, /*required=*/false);
    task.valid = task.valid && task.solution && task.verifier;
    sources->tasks.push_back(std::move(task));
  }
}

void ReadFiles(const fs::path& root, Sources* sources, Problems* problems, ReadBudget* budget) {
  std::error_code ec;
  fs::path files_dir = root / "files";
  if (!fs::exists(fs::symlink_status(files_dir, ec))) return;
  if (!fs::is_directory(fs::symlink_status(files_dir, ec))) {
    problems->Add("files", 0, "must be a directory");
    return;
  }
  for (fs::recursive_directory_iterator it(files_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string rel = "files/" + it->path().lexically_relative(files_dir).generic_string();
    auto status = it->symlink_status(ec);
    if (ec) break;
    if (fs::is_symlink(status)) {
      problems->Add(rel, 0, "symbolic links are not packed; copy the file into files/");
    } else if (fs::is_regular_file(status)) {
      std::error_code size_error;
      uintmax_t size = fs::file_size(it->path(), size_error);
      if (!size_error && !budget->Take(rel, size, problems)) continue;
      auto bytes = ReadFileToString(it->path().string());
      if (!bytes.ok()) {
        problems->Add(rel, 0, bytes.status().message());
      } else {
        sources->files.emplace_back(rel.substr(6), std::move(*bytes));
      }
    } else if (!fs::is_directory(status)) {
      problems->Add(rel, 0, "not a regular file or directory");
    }
  }
  if (ec) problems->Add("files", 0, "cannot list: " + ec.message());
}

// ---- The temporary output file ------------------------------------------------------------------

constexpr std::string_view kTempInfix = ".tmp.";

// Owns "<output>.tmp.<pid>.<random>"; unlinks it on destruction unless Release()d. Registered for
// removal on SIGINT/SIGTERM/SIGHUP (base/cleanup_registry.h) before the file exists.
class TempFile {
 public:
  static Result<TempFile> Create(const std::string& output) {
    std::random_device entropy;
    std::string path = output + std::string(kTempInfix) + std::to_string(::getpid()) + "." + std::to_string(entropy());
    ScopedCleanupPath registration(path, CleanupKind::kFile);
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoError("cannot create " + path, errno);
    return TempFile(std::move(path), std::move(registration));
  }
  TempFile(TempFile&& other) noexcept
      : path_(std::exchange(other.path_, std::string())), registration_(std::move(other.registration_)) {}
  TempFile& operator=(TempFile&&) = delete;
  ~TempFile() {
    if (!path_.empty()) {
      ::unlink(path_.c_str());
      ::unlink((path_ + "-journal").c_str());
    }
  }
  const std::string& path() const { return path_; }
  void Release() {
    path_.clear();
    registration_.Release();
  }

 private:
  TempFile(std::string path, ScopedCleanupPath registration)
      : path_(std::move(path)), registration_(std::move(registration)) {}
  std::string path_;
  ScopedCleanupPath registration_;
};

// The pid of a pack's temporary file (or its journal) named "<name>.tmp.<pid>.<digits>[-journal]",
// when <name> is the output's file name or ends in ".envdb"; nullopt for anything else.
std::optional<pid_t> TempFileOwner(std::string_view entry, std::string_view output_name) {
  size_t infix = entry.rfind(kTempInfix);
  if (infix == std::string_view::npos) return std::nullopt;
  std::string_view name = entry.substr(0, infix);
  if (name != output_name && !name.ends_with(".envdb")) return std::nullopt;
  std::string_view rest = entry.substr(infix + kTempInfix.size());
  if (rest.ends_with("-journal")) rest.remove_suffix(std::string_view("-journal").size());
  size_t dot = rest.find('.');
  if (dot == std::string_view::npos || dot + 1 == rest.size()) return std::nullopt;
  std::string_view random = rest.substr(dot + 1);
  if (!std::all_of(random.begin(), random.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  auto pid = LeadingPid(rest);
  if (!pid || std::to_string(*pid).size() != dot) return std::nullopt;
  return pid;
}

Status FsyncPath(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cannot open " + path, errno);
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync " + path, errno);
  return Status::Ok();
}

// ---- Budgets ------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

struct PackBudget {
  Clock::time_point deadline;
  std::chrono::milliseconds max_time{0};
  uint64_t max_bytes = 0;

  // Rounded up: a step given this as its timeout cannot time out before the deadline, so a
  // timeout under a binding budget is always reported as the budget's (truncated, it ended up to
  // a millisecond early, and the step's failure was reported as its own).
  std::chrono::milliseconds Remaining() const {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()));
  }
  std::string TimeSpent(const std::string& where) const {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", static_cast<double>(max_time.count()) / 1000.0);
    return std::string("the time budget of ") + seconds + " s (--max-seconds) was spent " + where;
  }
  std::string SizeSpent(const std::string& where) const {
    return "the size budget of " + std::to_string(max_bytes) + " bytes (--max-bytes) was spent " + where;
  }
};

// SQLite's progress handler: a non-zero answer interrupts the running statement (SQLITE_INTERRUPT).
int InterruptPastDeadline(void* context) {
  return Clock::now() >= static_cast<const PackBudget*>(context)->deadline ? 1 : 0;
}

// SQLITE_FULL means the page limit (max_page_count, the size budget) or a really full disk; the
// free space of the file's filesystem tells them apart.
std::string DescribeFull(sqlite3* handle, const PackBudget& budget, const std::string& where) {
  const char* file = sqlite3_db_filename(handle, "main");
  struct statvfs disk {};
  if (file != nullptr && *file != '\0' && ::statvfs(fs::path(file).parent_path().c_str(), &disk) == 0) {
    uint64_t free_bytes = static_cast<uint64_t>(disk.f_bavail) * disk.f_frsize;
    if (free_bytes < (uint64_t{16} << 20)) {
      return "the disk holding the output is full (" + std::to_string(free_bytes) + " bytes free) " + where;
    }
  }
  return budget.SizeSpent(where) + ": the bundle may not grow past it";
}

// The problem text of a failed statement or step when a budget stopped it; "" otherwise.
std::string BudgetProblem(sqlite3* handle, int rc, const PackBudget& budget, const std::string& where) {
  if ((rc & 0xff) == SQLITE_INTERRUPT) return budget.TimeSpent(where);
  if ((rc & 0xff) == SQLITE_FULL) return DescribeFull(handle, budget, where);
  return "";
}

// Maps an error of our own statements (filling the reserved tables, VACUUM) to the budget that
// stopped it, if one did.
Status WithBudget(Status status, sqlite3* handle, const PackBudget& budget, const std::string& source_dir,
                  const std::string& where) {
  if (status.ok()) return status;
  int rc = sqlite3_errcode(handle);
  std::string problem = BudgetProblem(handle, rc, budget, where);
  if (problem.empty() && Clock::now() >= budget.deadline) problem = budget.TimeSpent(where);
  if (problem.empty()) return status;
  return InvalidArgumentError("cannot pack " + source_dir + ": " + problem);
}

// ---- schema.sql ---------------------------------------------------------------------------------

struct SchemaGuard {
  std::string refusal;       // set when the authorizer refuses the statement being prepared
  bool transaction = false;  // the statement is BEGIN/COMMIT/END (skipped)
};

int SchemaAuthorizer(void* context, int action, const char* arg1, const char* arg2, const char*, const char*) {
  auto* guard = static_cast<SchemaGuard*>(context);
  std::string a1 = arg1 ? arg1 : "";
  std::string a2 = arg2 ? arg2 : "";
  auto refuse = [&](std::string why) {
    if (guard->refusal.empty()) guard->refusal = std::move(why);
    return SQLITE_DENY;
  };
  switch (action) {
    case SQLITE_ATTACH: return refuse("ATTACH is not allowed in schema.sql");
    case SQLITE_DETACH: return refuse("DETACH is not allowed in schema.sql");
    case SQLITE_PRAGMA: {
      std::string name = a1;
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      if (name == "foreign_keys") return SQLITE_OK;
      return refuse("PRAGMA " + a1 + " is not allowed in schema.sql (only foreign_keys)");
    }
    case SQLITE_TRANSACTION:
      if (a1 == "ROLLBACK") return refuse("ROLLBACK is not allowed in schema.sql");
      guard->transaction = true;
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      if (a2 == "load_extension" || a2 == "fts3_tokenizer") return refuse(a2 + "() is not allowed in schema.sql");
      return SQLITE_OK;
    default: return SQLITE_OK;
  }
}

// Skips whitespace and SQL comments; returns the offset of the next token.
size_t SkipSpaceAndComments(std::string_view sql, size_t at) {
  while (at < sql.size()) {
    if (std::isspace(static_cast<unsigned char>(sql[at]))) {
      ++at;
    } else if (sql.substr(at, 2) == "--") {
      size_t end = sql.find('\n', at);
      at = end == std::string_view::npos ? sql.size() : end + 1;
    } else if (sql.substr(at, 2) == "/*") {
      size_t end = sql.find("*/", at + 2);
      at = end == std::string_view::npos ? sql.size() : end + 2;
    } else {
      break;
    }
  }
  return at;
}

// Runs schema.sql statement by statement inside the caller's transaction, so that an error can
// name its line. Stops at the first error; returns true when that error is a spent budget.
bool RunSchemaSql(Database& db, const std::string& sql, const PackBudget& budget, Problems* problems) {
  sqlite3* handle = db.handle();
  SchemaGuard guard;
  sqlite3_set_authorizer(handle, SchemaAuthorizer, &guard);
  int attach_limit = sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, 0);
  bool budget_spent = false;
  size_t at = 0;
  while (true) {
    at = SkipSpaceAndComments(sql, at);
    if (at >= sql.size()) break;
    // The progress handler sees long statements; many short ones are caught here.
    if (Clock::now() >= budget.deadline) {
      problems->Add("schema.sql", LineOfOffset(sql, at), budget.TimeSpent("before this statement"));
      budget_spent = true;
      break;
    }
    guard = SchemaGuard();
    sqlite3_stmt* raw = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(handle, sql.c_str() + at, static_cast<int>(sql.size() - at), &raw, &tail);
    size_t next = tail ? static_cast<size_t>(tail - sql.c_str()) : sql.size();
    auto report = [&] {
      int offset = sqlite3_error_offset(handle);
      int line = LineOfOffset(sql, at + static_cast<size_t>(std::max(offset, 0)));
      std::string spent = BudgetProblem(handle, rc, budget, "running this statement");
      budget_spent = !spent.empty();
      std::string message = !guard.refusal.empty() ? guard.refusal
                            : budget_spent         ? spent
                                                   : std::string(sqlite3_errmsg(handle));
      problems->Add("schema.sql", line, std::move(message));
    };
    if (rc != SQLITE_OK) {
      report();
      sqlite3_finalize(raw);
      break;
    }
    if (raw == nullptr) {  // only a comment or a stray ';'
      at = next > at ? next : at + 1;
      continue;
    }
    if (!guard.transaction) {
      rc = sqlite3_step(raw);
      while (rc == SQLITE_ROW) rc = sqlite3_step(raw);
    } else {
      rc = SQLITE_DONE;
    }
    if (rc != SQLITE_DONE) {
      report();
      sqlite3_finalize(raw);
      break;
    }
    sqlite3_finalize(raw);
    at = next;
  }
  sqlite3_set_authorizer(handle, nullptr, nullptr);
  sqlite3_limit(handle, SQLITE_LIMIT_ATTACHED, attach_limit);
  return budget_spent;
}

// Names starting with "_" belong to the bundle format.
Status CheckReservedNames(Database& db, const std::string& sql, Problems* problems) {
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt,
      db.Prepare("SELECT type, name FROM sqlite_schema WHERE (substr(name, 1, 1) = '_' OR substr(tbl_name, 1, 1) = '_')"
                 " AND substr(name, 1, 7) <> 'sqlite_' ORDER BY name"));
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return Status::Ok();
    std::string name = stmt.ColumnText(1);
    size_t at = sql.find(name);
    problems->Add(
        "schema.sql", at == std::string::npos ? 0 : LineOfOffset(sql, at),
        stmt.ColumnText(0) + " '" + name + "' uses a reserved name (names starting with '_' belong to the bundle)");
  }
}

// ---- envforge-worker analyze --------------------------------------------------------------------

struct AnalyzedTool {
  toolsets::ToolSpec spec;
  std::string source;
  int line = 0;
};

Status AnalyzeError(const std::string& what, const CommandOutput& output) {
  std::string err = output.stderr_text;
  if (err.size() > 4000) err = "..." + err.substr(err.size() - 4000);
  std::string message = "envforge-worker analyze " + what;
  message += err.empty() ? "; no stderr" : "; stderr:\n" + err;
  return InternalError(std::move(message));
}

Result<std::vector<AnalyzedTool>> RunAnalyze(const std::string& worker, const Sources& sources,
                                             std::chrono::milliseconds timeout, Problems* problems) {
  Json request = {{"tools", {{"path", "tools.py"}, {"source", sources.tools_py.value_or("")}}},
                  {"solutions", Json::array()},
                  {"verifiers", Json::array()},
                  {"oracles", Json::array()}};
  // An interpreter environment's solution is notebook code run in the task's own sandboxed
  // kernel (it leaves the answer in a variable `answer`), not a solve(tools) function run by the
  // worker: the worker's rules for solutions do not apply to it.
  const bool kernel_solutions = sources.interpreter();
  for (const TaskSource& task : sources.tasks) {
    std::string dir = "tasks/" + task.id + "/";
    auto add = [&](const char* list, const char* file, const std::optional<std::string>& source) {
      if (source) request[list].push_back({{"task", task.id}, {"path", dir + file}, {"source", *source}});
    };
    if (!kernel_solutions) add("solutions", "solution.py", task.solution);
    add("verifiers", "verifier.py", task.verifier);
    add("oracles", "oracle.py", task.oracle);
  }
  CommandOptions command;
  command.stdin_text = DumpJson(request);
  command.timeout = timeout;
  auto run = RunCommand({worker, "analyze"}, command);
  if (!run.ok()) return InternalError("cannot run " + worker + " analyze: " + run.status().message());
  const CommandOutput& output = *run;
  if (output.timed_out) {
    return AnalyzeError("timed out after " + std::to_string(timeout.count()) + " ms", output);
  }
  if (output.term_signal != 0)
    return AnalyzeError("was killed by signal " + std::to_string(output.term_signal), output);
  if (output.exit_code != 0) return AnalyzeError("exited with status " + std::to_string(output.exit_code), output);
  auto reply = ParseJson(output.stdout_text, "its output");
  if (!reply.ok()) return AnalyzeError("printed something that is not JSON (" + reply.status().message() + ")", output);
  auto shape_error = [&](const std::string& what) { return AnalyzeError("replied without " + what, output); };
  if (!reply->is_object() || !(*reply)["tools"].is_array() || !(*reply)["problems"].is_array()) {
    return shape_error("\"tools\" and \"problems\" arrays");
  }
  for (const Json& p : (*reply)["problems"]) {
    if (!p.is_object() || !p.contains("path") || !p["path"].is_string() || !p.contains("message") ||
        !p["message"].is_string()) {
      return shape_error("a path and a message in every problem");
    }
    int line = p.contains("line") && p["line"].is_number_integer() ? p["line"].get<int>() : 0;
    if (!sources.tools_py && p["path"] == "tools.py") continue;  // already reported as missing
    problems->Add(p["path"].get<std::string>(), line, p["message"].get<std::string>());
  }
  std::vector<AnalyzedTool> tools;
  for (const Json& t : (*reply)["tools"]) {
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() || !t.contains("description") ||
        !t["description"].is_string() || !t.contains("inputSchema") || !t.contains("source") ||
        !t["source"].is_string()) {
      return shape_error("name, description (strings), inputSchema and source in every tool");
    }
    AnalyzedTool tool;
    tool.spec.name = t["name"].get<std::string>();
    tool.spec.description = t["description"].get<std::string>();
    tool.spec.input_schema = t["inputSchema"];
    tool.source = t["source"].get<std::string>();
    tool.line = t.contains("line") && t["line"].is_number_integer() ? t["line"].get<int>() : 0;
    tools.push_back(std::move(tool));
  }
  return tools;
}

void CheckTools(const Sources& sources, const std::vector<AnalyzedTool>& tools, Problems* problems) {
  if (!sources.tools_py) return;
  std::set<std::string> seen;
  for (const AnalyzedTool& tool : tools) {
    const std::string& name = tool.spec.name;
    if (!toolsets::IsValidToolName(name)) {
      problems->Add("tools.py", tool.line, "tool name '" + name + "' is not 1-128 characters of [A-Za-z0-9_.-]");
    } else if (name == toolsets::kSubmitResultTool) {
      problems->Add("tools.py", tool.line, "tool name 'submit_result' is reserved for the runtime");
    } else if (sources.interpreter() && toolsets::IsInterpreterTool(name)) {
      problems->Add("tools.py", tool.line,
                    "tool name '" + name + "' is reserved for the kernel in interpreter environments");
    } else if (!seen.insert(name).second) {
      problems->Add("tools.py", tool.line, "tool '" + name + "' is defined twice");
    }
    if (!tool.spec.input_schema.is_object()) {
      problems->Add("tools.py", tool.line, "tool '" + name + "': inputSchema must be a JSON Schema object");
    } else if (Status schema = toolsets::CheckSchema(tool.spec.input_schema); !schema.ok()) {
      problems->Add("tools.py", tool.line, "tool '" + name + "': inputSchema: " + schema.message());
    }
  }
  // An interpreter environment's sessions have the kernel's tools even when tools.py adds none.
  if (tools.empty() && !sources.interpreter() && !problems->Mentions("tools.py")) {
    problems->Add("tools.py", 0, "defines no tool (tools are the public module-level functions)");
  }
}

// ---- Filling the bundle -------------------------------------------------------------------------

Status Insert(Database& db, const char* sql, const std::vector<SqlValue>& values) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll(values));
  return stmt.Run();
}

Status FillReservedTables(Database& db, const Sources& sources, const std::vector<AnalyzedTool>& tools,
                          const Json& provenance) {
  ENVFORGE_RETURN_IF_ERROR(db.Exec(internal::kReservedTablesSql));
  const char* kEnvSql = "INSERT INTO _env(key, value) VALUES(?, ?)";
  for (const char* key : {"name", "kind", "category", "description"}) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string(key), sources.env.at(key).get<std::string>()}));
  }
  ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string("format_version"), std::to_string(kBundleFormatVersion)}));
  ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string("provenance"), DumpJson(provenance)}));
  ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string("tools_module"), *sources.tools_py}));

  const char* kToolSql =
      "INSERT INTO _tools(position, name, description, input_schema, source, builtin) VALUES(?, ?, ?, ?, ?, ?)";
  int64_t position = 0;
  for (const AnalyzedTool& tool : tools) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, kToolSql,
                                    {position++, tool.spec.name, tool.spec.description,
                                     DumpJson(tool.spec.input_schema), tool.source, int64_t{0}}));
  }
  if (sources.interpreter()) {
    for (const toolsets::ToolSpec& kernel_tool : toolsets::InterpreterToolSpecs()) {
      ENVFORGE_RETURN_IF_ERROR(Insert(db, kToolSql,
                                      {position++, kernel_tool.name, kernel_tool.description,
                                       DumpJson(kernel_tool.input_schema), std::string(), int64_t{1}}));
    }
  }
  toolsets::ToolSpec submit = toolsets::SubmitResultSpec();
  ENVFORGE_RETURN_IF_ERROR(
      Insert(db, kToolSql,
             {position, submit.name, submit.description, DumpJson(submit.input_schema), std::string(), int64_t{1}}));

  const char* kTaskSql =
      "INSERT INTO _tasks(id, prompt, answer_schema, solution_source, verifier_source, oracle_source, difficulty,"
      " knobs, version) VALUES(?, ?, ?, ?, ?, ?, ?, ?, '')";
  for (const TaskSource& task : sources.tasks) {
    SqlValue oracle = task.oracle ? SqlValue(*task.oracle) : SqlValue(std::monostate{});
    ENVFORGE_RETURN_IF_ERROR(Insert(
        db, kTaskSql,
        {task.id, task.spec.at("prompt").get<std::string>(), DumpJson(task.spec.at("answer_schema")), *task.solution,
         *task.verifier, oracle, task.spec.at("difficulty").get<int64_t>(), DumpJson(task.spec.at("knobs"))}));
  }
  for (const auto& [path, bytes] : sources.files) {
    ENVFORGE_RETURN_IF_ERROR(Insert(db, "INSERT INTO _files(path, data) VALUES(?, ?)",
                                    {path, std::vector<uint8_t>(bytes.begin(), bytes.end())}));
  }

  ENVFORGE_ASSIGN_OR_RETURN(std::string hash, internal::ContentHashOf(db));
  ENVFORGE_RETURN_IF_ERROR(Insert(db, kEnvSql, {std::string("content_hash"), hash}));
  for (const TaskSource& task : sources.tasks) {
    TaskRecord record;
    record.prompt = task.spec.at("prompt").get<std::string>();
    record.solution_source = *task.solution;
    record.verifier_source = *task.verifier;
    ENVFORGE_RETURN_IF_ERROR(
        Insert(db, "UPDATE _tasks SET version = ? WHERE id = ?", {TaskVersion(hash, record), task.id}));
  }
  return Status::Ok();
}

// The size budget as SQLite's page limit: past it, writes fail with SQLITE_FULL.
Status LimitPages(Database& db, uint64_t max_bytes) {
  int64_t page_bytes = 4096;
  {
    ENVFORGE_ASSIGN_OR_RETURN(Statement page_size, db.Prepare("PRAGMA page_size"));
    ENVFORGE_ASSIGN_OR_RETURN(bool has_row, page_size.Step());
    if (has_row) page_bytes = std::max<int64_t>(512, page_size.ColumnInt(0));
  }  // finalized: VACUUM refuses to run while a statement is alive
  uint64_t max_pages = std::max<uint64_t>(1, max_bytes / static_cast<uint64_t>(page_bytes));
  return db.Exec("PRAGMA max_page_count = " + std::to_string(max_pages));
}

// The analysis under what is left of the time budget; a timeout caused by the budget is reported
// as the budget's.
Result<std::vector<AnalyzedTool>> RunAnalyzeInBudget(const std::string& source_dir, const PackOptions& options,
                                                     const PackBudget& budget, const Sources& sources,
                                                     Problems* problems) {
  const std::string where = "in envforge-worker analyze (the static analysis of tools.py and the tasks' sources)";
  std::string worker = options.worker_path;
  if (worker.empty()) {
    auto found = FindWorkerExecutable();
    if (!found.ok()) return InternalError("cannot pack " + source_dir + ": " + found.status().message());
    worker = *found;
  }
  std::chrono::milliseconds left = budget.Remaining();
  if (left.count() == 0)
    return InvalidArgumentError("cannot pack " + source_dir + ": " + budget.TimeSpent("before " + where));
  bool budget_binds = left < options.analyze_timeout;
  auto tools = RunAnalyze(worker, sources, std::min(options.analyze_timeout, left), problems);
  if (!tools.ok() && budget_binds && Clock::now() >= budget.deadline) {
    return InvalidArgumentError("cannot pack " + source_dir + ": " + budget.TimeSpent(where));
  }
  return tools;
}

Status PackInto(const std::string& source_dir, const fs::path& root, const std::string& temp_path,
                const PackOptions& options, const PackBudget& budget) {
  Problems problems;
  Sources sources;
  ReadBudget read_budget{.max_bytes = budget.max_bytes};
  CheckEnvJson(root, &sources, &problems, &read_budget);
  sources.schema_sql = ReadSource(root, "schema.sql", &problems, &read_budget);
  sources.tools_py = ReadSource(root, "tools.py", &problems, &read_budget);
  ReadTasks(root, &sources, &problems, &read_budget);
  ReadFiles(root, &sources, &problems, &read_budget);
  if (read_budget.exhausted) return problems.ToStatus(source_dir);

  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(temp_path, Database::Mode::kReadWrite));
  sqlite3* handle = db.handle();
  sqlite3_db_config(handle, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  // The budgets hold for every statement on this connection, schema.sql's and ours.
  sqlite3_progress_handler(handle, 10'000, InterruptPastDeadline, const_cast<PackBudget*>(&budget));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("PRAGMA journal_mode = MEMORY; PRAGMA synchronous = OFF"));
  ENVFORGE_RETURN_IF_ERROR(LimitPages(db, budget.max_bytes));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("BEGIN"));
  if (sources.schema_sql) {
    if (RunSchemaSql(db, *sources.schema_sql, budget, &problems)) return problems.ToStatus(source_dir);
    if (!problems.Mentions("schema.sql")) {
      ENVFORGE_RETURN_IF_ERROR(WithBudget(CheckReservedNames(db, *sources.schema_sql, &problems), handle, budget,
                                          source_dir, "checking the names schema.sql created"));
    }
  }

  ENVFORGE_ASSIGN_OR_RETURN(auto tools, RunAnalyzeInBudget(source_dir, options, budget, sources, &problems));
  CheckTools(sources, tools, &problems);
  if (!problems.empty()) return problems.ToStatus(source_dir);

  Json provenance = sources.env.value("provenance", Json::object());
  for (const auto& [key, value] : options.provenance.items()) provenance[key] = value;
  if (!options.provenance.contains("source_dir")) {
    provenance["source_dir"] = fs::absolute(root).lexically_normal().string();
  }
  ENVFORGE_RETURN_IF_ERROR(WithBudget(FillReservedTables(db, sources, tools, provenance), handle, budget, source_dir,
                                      "storing the sources, tools, tasks and files/ in the bundle"));
  ENVFORGE_RETURN_IF_ERROR(db.Exec("COMMIT"));
  ENVFORGE_RETURN_IF_ERROR(WithBudget(db.Exec("VACUUM"), handle, budget, source_dir, "compacting the bundle (VACUUM)"));
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> AnalyzeBundleSources(const EnvBundle& bundle, const PackOptions& options) {
  std::string worker = options.worker_path;
  if (worker.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(worker, FindWorkerExecutable());
  }
  Sources sources;
  sources.env = {{"kind", bundle.manifest.kind}};
  sources.tools_py = bundle.tools_module;
  for (const TaskRecord& record : bundle.tasks) {
    TaskSource task;
    task.id = record.id;
    task.solution = record.solution_source;
    task.verifier = record.verifier_source;
    if (!record.oracle_source.empty()) task.oracle = record.oracle_source;
    sources.tasks.push_back(std::move(task));
  }
  Problems problems;
  ENVFORGE_ASSIGN_OR_RETURN(auto tools, RunAnalyze(worker, sources, options.analyze_timeout, &problems));
  std::vector<std::string> found;
  for (const Problem& p : problems.list()) {
    found.push_back(p.path + (p.line > 0 ? ":" + std::to_string(p.line) : std::string()) + ": " + p.message);
  }
  // The stored tool specs must be the ones the stored module defines: a bundle edited by hand
  // (or by another tool) could otherwise promise the model tools that behave differently.
  std::vector<const ToolRecord*> stored;
  for (const ToolRecord& tool : bundle.tools) {
    if (!tool.builtin) stored.push_back(&tool);
  }
  if (stored.size() != tools.size()) {
    found.push_back("_tools lists " + std::to_string(stored.size()) + " tools but tools_module defines " +
                    std::to_string(tools.size()));
  } else {
    for (size_t i = 0; i < tools.size(); ++i) {
      if (stored[i]->spec.name != tools[i].spec.name || stored[i]->spec.input_schema != tools[i].spec.input_schema) {
        found.push_back("_tools entry " + stored[i]->spec.name + " does not match tools_module's " +
                        tools[i].spec.name);
      }
    }
  }
  return found;
}

Status PackEnvironment(const std::string& source_dir, const std::string& output_path, const PackOptions& options) {
  std::error_code ec;
  fs::path root(source_dir);
  if (!fs::is_directory(root, ec)) return NotFoundError("environment source directory not found: " + source_dir);
  if (!options.provenance.is_object()) return InvalidArgumentError("PackOptions::provenance must be a JSON object");
  if (output_path.empty()) return InvalidArgumentError("empty output path");
  if (options.max_time.count() <= 0)
    return InvalidArgumentError("PackOptions::max_time (--max-seconds) must be positive");
  if (options.max_bytes == 0) return InvalidArgumentError("PackOptions::max_bytes (--max-bytes) must be positive");
  PackBudget budget{Clock::now() + options.max_time, options.max_time, options.max_bytes};
  fs::path output(output_path);
  fs::path output_dir = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  if (!fs::is_directory(output_dir, ec)) return NotFoundError("output directory not found: " + output_dir.string());

  // Leftovers of packs that were SIGKILLed (their handlers never ran) go first.
  std::string output_name = output.filename().string();
  SweepDeadProcessEntries(output_dir.string(),
                          [&](std::string_view entry) { return TempFileOwner(entry, output_name); });
  ENVFORGE_ASSIGN_OR_RETURN(TempFile temp, TempFile::Create(output_path));
  // Search environments have a source layout of their own (sandbox/search_bundle.h).
  if (IsSearchEnvironmentSource(source_dir)) {
    ENVFORGE_RETURN_IF_ERROR(PackSearchEnvironmentInto(source_dir, temp.path(), options.provenance, options.max_bytes));
  } else {
    ENVFORGE_RETURN_IF_ERROR(PackInto(source_dir, root, temp.path(), options, budget));
  }
  // Publish only what loads: the same checks any reader will make.
  auto loaded = EnvBundle::Load(temp.path());
  if (!loaded.ok()) return InternalError("the packed bundle does not load: " + loaded.status().message());
  ENVFORGE_RETURN_IF_ERROR(FsyncPath(temp.path(), O_RDONLY));
  if (::rename(temp.path().c_str(), output_path.c_str()) != 0) return ErrnoError("rename to " + output_path, errno);
  temp.Release();
  return FsyncPath(output_dir.string(), O_RDONLY | O_DIRECTORY);
}

}  // namespace envforge::sandbox
