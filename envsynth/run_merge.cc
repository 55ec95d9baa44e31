// MergeRuns (run_merge.h): checks the inputs (RunStore::Open, equal configs), creates the output's
// schema, format version and config with RunStore::Create in a temporary file, then copies every
// input's tables into it by column name inside one transaction and renames it into place.
//
// Events are staged in a temporary table so that the output's ids follow time order across the
// inputs and duplicates (an input copied twice, or merges of merges sharing a shard) collapse.
#include "envsynth/run_merge.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/fd.h"
#include "base/json.h"
#include "base/sqlite.h"
#include "envsynth/run_store.h"

namespace envforge::envsynth {
namespace {

// How the rows of a table from several inputs become the output's.
enum class Merge {
  kFirstWins,  // a key already copied keeps its row
  kMustMatch,  // a key already copied must come with an identical row
  kFreshIds,   // every row is new: the primary key is assigned again
};

struct TableRule {
  const char* table;
  const char* noun;  // what one row is called in messages
  Merge merge;
};

// Every table of the run database (run_store.h). run_meta's format_version and config rows are
// written by RunStore::Create before any input is copied, so kFirstWins keeps them.
constexpr TableRule kTables[] = {
    {"run_meta", "run_meta row", Merge::kFirstWins},
    {"environments", "environment", Merge::kMustMatch},
    {"candidates", "candidate", Merge::kMustMatch},
    {"events", "event", Merge::kFreshIds},
};

constexpr const char* kStagedEvents = "temp.merge_events";

// Config keys that legitimately differ between the shards of one run.
bool IsPerShardKey(const std::string& key) { return key == "shard" || key == "out_dir" || key == "merged_from"; }

struct Input {
  std::string path;  // absolute
  Json config;
};

struct Column {
  std::string name;
  bool primary_key = false;
};

std::string Quote(const std::string& identifier) {
  std::string out = "\"";
  for (char c : identifier) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string JoinQuoted(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + Quote(name);
  return out;
}

std::string Placeholders(size_t count) {
  std::string out;
  for (size_t i = 0; i < count; ++i) out += i ? ",?" : "?";
  return out;
}

std::string Shorten(std::string text) { return text.size() > 60 ? text.substr(0, 57) + "..." : text; }

std::string ShowValue(const SqlValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return "NULL";
  if (const auto* number = std::get_if<int64_t>(&value)) return std::to_string(*number);
  if (const auto* real = std::get_if<double>(&value)) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", *real);
    return text;
  }
  if (const auto* text = std::get_if<std::string>(&value)) return "'" + Shorten(*text) + "'";
  return "<" + std::to_string(std::get<std::vector<uint8_t>>(value).size()) + " bytes>";
}

std::string KeyText(const SqlValue& value) {
  const auto* text = std::get_if<std::string>(&value);
  return text ? *text : ShowValue(value);
}

std::string AbsolutePath(const std::string& path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

std::string ParentDirectory(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

Status FsyncPath(const std::string& path, int flags) {
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError("cannot open " + path, errno);
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync " + path, errno);
  return Status::Ok();
}

// The temporary output and SQLite's files beside it; removed on destruction unless Release()d.
// A leftover of the same name can only be from a dead process with this pid, so it goes first.
class TempOutput {
 public:
  explicit TempOutput(std::string path) : path_(std::move(path)) { Remove(); }
  ~TempOutput() {
    if (!released_) Remove();
  }
  TempOutput(const TempOutput&) = delete;
  TempOutput& operator=(const TempOutput&) = delete;
  const std::string& path() const { return path_; }
  void Release() { released_ = true; }

 private:
  void Remove() const {
    for (const char* suffix : {"", "-journal", "-wal", "-shm"}) ::unlink((path_ + suffix).c_str());
  }
  std::string path_;
  bool released_ = false;
};

// Moves `from` to `to` unless `to` exists. RENAME_NOREPLACE closes the window between the
// check in CheckOutput and the rename; a file system without it gets a check and a plain rename.
Status RenameNoReplace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return Status::Ok();
  if (errno == EEXIST) return AlreadyExistsError("output " + to + " appeared while merging; it was left untouched");
  if (errno != EINVAL && errno != ENOSYS) return ErrnoError("rename to " + to, errno);
  struct stat info {};
  if (::lstat(to.c_str(), &info) == 0)
    return AlreadyExistsError("output " + to + " appeared while merging; it was left untouched");
  if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoError("rename to " + to, errno);
  return Status::Ok();
}

Status CheckOutput(const std::string& output) {
  struct stat info {};
  if (::lstat(output.c_str(), &info) == 0)
    return AlreadyExistsError("output " + output + " exists; merge into a new file");
  if (errno != ENOENT) return ErrnoError("output " + output, errno);
  const std::string directory = ParentDirectory(output);
  if (::stat(directory.c_str(), &info) != 0) return ErrnoError("directory of output " + output, errno);
  if (!S_ISDIR(info.st_mode))
    return InvalidArgumentError("directory of output " + output + ": " + directory + " is not a directory");
  return Status::Ok();
}

Result<std::vector<Input>> OpenInputs(const std::vector<std::string>& paths) {
  std::vector<Input> inputs;
  for (const std::string& path : paths) {
    ENVFORGE_ASSIGN_OR_RETURN(RunStore store, RunStore::Open(path));
    if (!store.config().is_object())
      return InvalidArgumentError("run database " + path + ": its config is not a JSON object");
    inputs.push_back({AbsolutePath(path), store.config()});
  }
  return inputs;
}

// The first key, in key order, whose values differ (a key one side lacks differs).
std::optional<std::string> FirstDifference(const Json& a, const Json& b) {
  std::set<std::string> keys;
  for (const auto& item : a.items()) keys.insert(item.key());
  for (const auto& item : b.items()) keys.insert(item.key());
  for (const std::string& key : keys) {
    if (IsPerShardKey(key)) continue;
    if (!a.contains(key) || !b.contains(key) || a.at(key) != b.at(key)) return key;
  }
  return std::nullopt;
}

std::string ShowConfigValue(const Json& config, const std::string& key) {
  return config.contains(key) ? Shorten(DumpJson(config.at(key))) : "no value";
}

Status CheckConfigs(const std::vector<Input>& inputs) {
  const Input& first = inputs.front();
  for (size_t i = 1; i < inputs.size(); ++i) {
    std::optional<std::string> key = FirstDifference(first.config, inputs[i].config);
    if (!key) continue;
    return InvalidArgumentError("config key '" + *key + "' differs: " + ShowConfigValue(first.config, *key) + " in " +
                                first.path + ", " + ShowConfigValue(inputs[i].config, *key) + " in " + inputs[i].path +
                                "; the shards of one run take the same options except --shard, --run and --out");
  }
  return Status::Ok();
}

Json MergedConfig(const std::vector<Input>& inputs) {
  Json config = inputs.front().config;
  config["shard"] = Json::array({0, 1});
  Json merged_from = Json::array();
  for (const Input& input : inputs) merged_from.push_back(input.path);
  config["merged_from"] = std::move(merged_from);
  return config;
}

Result<std::vector<std::string>> TableNames(Database& db) {
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement statement,
      db.Prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"));
  std::vector<std::string> names;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool has_row, statement.Step());
    if (!has_row) return names;
    names.push_back(statement.ColumnText(0));
  }
}

Result<std::vector<Column>> TableColumns(Database& db, const std::string& table) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement statement, db.Prepare("SELECT name, pk FROM pragma_table_info(?) ORDER BY cid"));
  ENVFORGE_RETURN_IF_ERROR(statement.BindAll({table}));
  std::vector<Column> columns;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool has_row, statement.Step());
    if (!has_row) return columns;
    columns.push_back({statement.ColumnText(0), statement.ColumnInt(1) > 0});
  }
}

const TableRule* FindRule(const std::string& table) {
  for (const TableRule& rule : kTables) {
    if (table == rule.table) return &rule;
  }
  return nullptr;
}

// Copies inputs into the output connection (inside the caller's transaction), remembering which
// input each environment and candidate key came from.
class Merger {
 public:
  Merger(Database& out, const std::vector<Input>& inputs) : out_(out), inputs_(inputs) {}
  Status Begin();
  Status CopyInput(size_t index);
  Status Finish();  // moves the staged events into the output

 private:
  // The columns of `rule`'s table to copy from `in` (every column by name; kFreshIds without
  // the primary key), and the output's key column (kFirstWins and kMustMatch).
  Status PlanColumns(Database& in, size_t index, const TableRule& rule, std::vector<std::string>& names,
                     std::string& key) const;
  Status CopyTable(Database& in, size_t index, const TableRule& rule);
  Status CheckSameRow(const TableRule& rule, const std::vector<std::string>& names, size_t key_column,
                      const std::vector<SqlValue>& row, size_t owner, size_t index);

  Database& out_;
  const std::vector<Input>& inputs_;
  std::unordered_map<std::string, std::unordered_map<std::string, size_t>> owners_;  // table -> key -> input
  std::vector<std::string> event_columns_;  // every event column some input had, first seen first
};

Status Merger::Begin() { return out_.Exec("CREATE TEMP TABLE merge_events AS SELECT * FROM main.events WHERE 0"); }

Status Merger::CopyInput(size_t index) {
  const std::string& path = inputs_[index].path;
  // Read-write as RunStore::Open opens it, but never written: a read-only connection would leave
  // the input's -wal and -shm files behind when it closes. BEGIN: one snapshot of a running shard.
  ENVFORGE_ASSIGN_OR_RETURN(Database in, Database::Open(path, Database::Mode::kReadWrite));
  ENVFORGE_RETURN_IF_ERROR(in.Exec("PRAGMA busy_timeout=5000; BEGIN"));
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<std::string> tables, TableNames(in));
  for (const std::string& table : tables) {
    if (FindRule(table) == nullptr) {
      return FailedPreconditionError(path + " has a table '" + table +
                                     "' that this envforge's run database does not have " +
                                     "(written by a newer envforge?)");
    }
  }
  for (const TableRule& rule : kTables) {
    bool present = false;
    for (const std::string& table : tables) present = present || table == rule.table;
    if (present) ENVFORGE_RETURN_IF_ERROR(CopyTable(in, index, rule));
  }
  return in.Exec("COMMIT");
}

Status Merger::PlanColumns(Database& in, size_t index, const TableRule& rule, std::vector<std::string>& names,
                           std::string& key) const {
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<Column> in_columns, TableColumns(in, rule.table));
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<Column> out_columns, TableColumns(out_, rule.table));
  std::set<std::string> known;
  for (const Column& column : out_columns) {
    known.insert(column.name);
    if (column.primary_key) key = column.name;
  }
  for (const Column& column : in_columns) {
    if (rule.merge == Merge::kFreshIds && column.primary_key) continue;
    if (known.count(column.name) == 0) {
      return FailedPreconditionError(inputs_[index].path + ": column " + rule.table + "." + column.name +
                                     " is not in this envforge's run database (written by a newer envforge?)");
    }
    names.push_back(column.name);
  }
  bool has_key = false;
  for (const std::string& name : names) has_key = has_key || name == key;
  if (rule.merge != Merge::kFreshIds && !has_key) {
    return FailedPreconditionError(inputs_[index].path + ": table " + rule.table + " has no column '" + key + "'");
  }
  return Status::Ok();
}

Status Merger::CopyTable(Database& in, size_t index, const TableRule& rule) {
  std::vector<std::string> names;
  std::string key;
  ENVFORGE_RETURN_IF_ERROR(PlanColumns(in, index, rule, names, key));
  size_t key_column = 0;
  while (key_column < names.size() && names[key_column] != key) ++key_column;
  const std::string target = rule.merge == Merge::kFreshIds ? kStagedEvents : "main." + Quote(rule.table);
  const std::string context = inputs_[index].path + ", table " + rule.table;
  ENVFORGE_ASSIGN_OR_RETURN(Statement select, in.Prepare("SELECT " + JoinQuoted(names) + " FROM " + Quote(rule.table)));
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement insert,
      out_.Prepare("INSERT INTO " + target + " (" + JoinQuoted(names) + ") VALUES (" + Placeholders(names.size()) +
                   ")" + (rule.merge == Merge::kFirstWins ? " ON CONFLICT DO NOTHING" : "")));
  auto& owners = owners_[rule.table];
  while (true) {
    auto has_row = select.Step();
    if (!has_row.ok()) return has_row.status().WithContext(context);
    if (!*has_row) break;
    std::vector<SqlValue> row;
    for (size_t i = 0; i < names.size(); ++i) row.push_back(select.Column(static_cast<int>(i)));
    if (rule.merge == Merge::kMustMatch) {
      auto [owner, added] = owners.emplace(KeyText(row[key_column]), index);
      if (!added) {
        ENVFORGE_RETURN_IF_ERROR(CheckSameRow(rule, names, key_column, row, owner->second, index));
        continue;
      }
    }
    Status inserted = insert.Reset();
    if (inserted.ok()) inserted = insert.BindAll(row);
    if (inserted.ok()) inserted = insert.Run();
    if (!inserted.ok()) return inserted.WithContext(context);
  }
  if (rule.merge == Merge::kFreshIds) {
    for (const std::string& name : names) {
      if (std::find(event_columns_.begin(), event_columns_.end(), name) == event_columns_.end())
        event_columns_.push_back(name);
    }
  }
  return Status::Ok();
}

// `row` of input `index` against the row of the same key already in the output, which came from
// input `owner`.
Status Merger::CheckSameRow(const TableRule& rule, const std::vector<std::string>& names, size_t key_column,
                            const std::vector<SqlValue>& row, size_t owner, size_t index) {
  ENVFORGE_ASSIGN_OR_RETURN(Statement select,
                            out_.Prepare("SELECT " + JoinQuoted(names) + " FROM main." + Quote(rule.table) + " WHERE " +
                                         Quote(names[key_column]) + " = ?"));
  ENVFORGE_RETURN_IF_ERROR(select.BindAll({row[key_column]}));
  ENVFORGE_ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return InternalError(std::string("merge lost the ") + rule.noun + " " + KeyText(row[key_column]));
  for (size_t i = 0; i < names.size(); ++i) {
    SqlValue existing = select.Column(static_cast<int>(i));
    if (existing == row[i]) continue;
    return InvalidArgumentError(std::string(rule.noun) + " '" + KeyText(row[key_column]) + "' is in both " +
                                inputs_[owner].path + " and " + inputs_[index].path + " with different rows (" +
                                names[i] + ": " + ShowValue(existing) + " vs " + ShowValue(row[i]) +
                                "); the shards of one run (--shard I/N, the same N) never overlap");
  }
  return Status::Ok();
}

Status Merger::Finish() {
  if (!event_columns_.empty()) {
    const std::string columns = JoinQuoted(event_columns_);
    const bool timed = std::find(event_columns_.begin(), event_columns_.end(), "at") != event_columns_.end();
    ENVFORGE_RETURN_IF_ERROR(out_.Exec("INSERT INTO main.events (" + columns + ") SELECT " + columns + " FROM " +
                                       kStagedEvents + " GROUP BY " + columns + " ORDER BY " +
                                       (timed ? "\"at\", " : "") + "MIN(rowid)"));
  }
  return out_.Exec(std::string("DROP TABLE ") + kStagedEvents);
}

// Creates `path` with the merged config and copies every input into it, in one transaction.
Status WriteMerged(const std::vector<Input>& inputs, const std::string& path) {
  {
    // The schema, format version and config, exactly as a run writes them; closed again here.
    ENVFORGE_ASSIGN_OR_RETURN(RunStore created, RunStore::Create(path, MergedConfig(inputs)));
  }
  ENVFORGE_ASSIGN_OR_RETURN(Database out, Database::Open(path, Database::Mode::kReadWrite));
  // Rollback-journal mode: after the commit the file is whole on its own, with no -wal to lose
  // in the rename.
  ENVFORGE_RETURN_IF_ERROR(out.Exec("PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL;"));
  ENVFORGE_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(out));
  Merger merger(out, inputs);
  ENVFORGE_RETURN_IF_ERROR(merger.Begin());
  for (size_t i = 0; i < inputs.size(); ++i) ENVFORGE_RETURN_IF_ERROR(merger.CopyInput(i));
  ENVFORGE_RETURN_IF_ERROR(merger.Finish());
  return transaction.Commit();
}

}  // namespace

Status MergeRuns(const std::vector<std::string>& inputs, const std::string& output) {
  if (inputs.empty()) return InvalidArgumentError("merge needs at least one run database");
  ENVFORGE_RETURN_IF_ERROR(CheckOutput(output));
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<Input> runs, OpenInputs(inputs));
  ENVFORGE_RETURN_IF_ERROR(CheckConfigs(runs));
  TempOutput temp(output + ".tmp." + std::to_string(::getpid()));
  ENVFORGE_RETURN_IF_ERROR(WriteMerged(runs, temp.path()));
  ENVFORGE_RETURN_IF_ERROR(FsyncPath(temp.path(), O_RDONLY));
  ENVFORGE_RETURN_IF_ERROR(RenameNoReplace(temp.path(), output));
  temp.Release();
  return FsyncPath(ParentDirectory(output), O_RDONLY | O_DIRECTORY);
}

}  // namespace envforge::envsynth
