#include "toolsets/search/corpus_store.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <optional>
#include <set>
#include <utility>

#include "base/cleanup_registry.h"

namespace envforge::search {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE documents(
  id INTEGER PRIMARY KEY,
  doc_id TEXT NOT NULL UNIQUE,
  title TEXT NOT NULL,
  source TEXT NOT NULL,
  url TEXT NOT NULL,
  text TEXT NOT NULL);
CREATE TABLE links(from_id TEXT NOT NULL, to_id TEXT NOT NULL, anchor TEXT NOT NULL);
CREATE VIRTUAL TABLE documents_fts USING fts5(title, text, content='documents', content_rowid='id',
  tokenize='porter unicode61 remove_diacritics 2');
)sql";

// Secondary indexes are built after the bulk insert: cheaper than maintaining them row by row.
constexpr const char* kIndexes = R"sql(
CREATE INDEX documents_url ON documents(url);
CREATE INDEX documents_title ON documents(title COLLATE NOCASE);
CREATE INDEX links_from ON links(from_id);
CREATE INDEX links_to ON links(to_id);
)sql";

std::string UtcNow() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Result<SourceStats> SourceStatsFromJson(const Json& json) {
  if (!json.is_object() || !json.contains("name") || !json["name"].is_string()) {
    return DataLossError("corpus meta 'sources': an entry without a name");
  }
  SourceStats stats;
  stats.name = json["name"].get<std::string>();
  stats.documents = json.value("documents", int64_t{0});
  stats.links = json.value("links", int64_t{0});
  stats.bytes = json.value("bytes", int64_t{0});
  stats.seconds = json.value("seconds", 0.0);
  return stats;
}

}  // namespace

Json ToJson(const SourceStats& stats) {
  return Json{{"name", stats.name},
              {"documents", stats.documents},
              {"links", stats.links},
              {"bytes", stats.bytes},
              {"seconds", stats.seconds}};
}

Json ToJson(const CorpusInfo& info) {
  Json sources = Json::array();
  for (const SourceStats& stats : info.sources) sources.push_back(ToJson(stats));
  return Json{{"format_version", info.format_version},
              {"built_at", info.built_at},
              {"documents", info.documents},
              {"links", info.links},
              {"bytes", info.bytes},
              {"index_seconds", info.index_seconds},
              {"sources", std::move(sources)}};
}

// ---------------------------------------------------------------------------------------------
// CorpusWriter

struct CorpusWriter::Impl {
  std::string path;
  std::string temp_path;
  ScopedCleanupPath cleanup;
  std::optional<Database> db;
  std::optional<Statement> insert_document;
  std::optional<Statement> insert_link;
  std::optional<Transaction> transaction;
  int64_t in_transaction = 0;
  std::map<std::string, SourceStats> sources;  // documents and bytes per source, from Add()
  std::vector<std::string> source_order;       // sources by first Add(), the order meta lists them
  int64_t documents = 0;
  int64_t bytes = 0;
  bool finished = false;

  Status BeginIfNeeded() {
    if (transaction) return Status::Ok();
    ENVFORGE_ASSIGN_OR_RETURN(Transaction begun, Transaction::Begin(*db));
    transaction.emplace(std::move(begun));
    in_transaction = 0;
    return Status::Ok();
  }

  Status CommitPending() {
    if (!transaction) return Status::Ok();
    Status committed = transaction->Commit();
    transaction.reset();
    return committed;
  }

  Status InsertLinks(const Document& document) {
    std::set<std::pair<std::string_view, std::string_view>> seen;
    for (const DocumentLink& link : document.links) {
      if (link.target.empty() || !seen.insert({link.target, link.anchor}).second) continue;
      ENVFORGE_RETURN_IF_ERROR(insert_link->Reset());
      ENVFORGE_RETURN_IF_ERROR(insert_link->BindAll({document.doc_id, link.target, link.anchor}));
      ENVFORGE_RETURN_IF_ERROR(insert_link->Run());
    }
    return Status::Ok();
  }

  // Counts kept links per source, once dangling ones are gone.
  Status CountLinks() {
    ENVFORGE_ASSIGN_OR_RETURN(Statement count, db->Prepare("SELECT d.source, count(*) FROM links l JOIN documents d "
                                                           "ON d.doc_id = l.from_id GROUP BY d.source"));
    while (true) {
      ENVFORGE_ASSIGN_OR_RETURN(bool row, count.Step());
      if (!row) break;
      sources[count.ColumnText(0)].links = count.ColumnInt(1);
    }
    return Status::Ok();
  }

  Status WriteMeta(const CorpusInfo& info) {
    Json sources_json = ToJson(info)["sources"];
    const std::vector<std::pair<std::string, std::string>> rows = {
        {"format_version", std::to_string(info.format_version)},
        {"built_at", info.built_at},
        {"documents", std::to_string(info.documents)},
        {"links", std::to_string(info.links)},
        {"bytes", std::to_string(info.bytes)},
        {"index_seconds", std::to_string(info.index_seconds)},
        {"sources", DumpJson(sources_json)}};
    ENVFORGE_ASSIGN_OR_RETURN(Statement insert, db->Prepare("INSERT INTO meta(key, value) VALUES (?, ?)"));
    for (const auto& [key, value] : rows) {
      ENVFORGE_RETURN_IF_ERROR(insert.Reset());
      ENVFORGE_RETURN_IF_ERROR(insert.BindAll({key, value}));
      ENVFORGE_RETURN_IF_ERROR(insert.Run());
    }
    return Status::Ok();
  }

  // Closes every statement and the connection (so the file is complete) and renames it.
  Status Publish() {
    insert_document.reset();
    insert_link.reset();
    db.reset();
    if (std::rename(temp_path.c_str(), path.c_str()) != 0)
      return ErrnoError("cannot rename the corpus to " + path, errno);
    cleanup.Release();
    return Status::Ok();
  }
};

CorpusWriter::CorpusWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CorpusWriter::~CorpusWriter() {
  if (impl_->finished && !impl_->db) return;
  impl_->transaction.reset();
  impl_->insert_document.reset();
  impl_->insert_link.reset();
  impl_->db.reset();
  std::remove(impl_->temp_path.c_str());
}

Result<std::unique_ptr<CorpusWriter>> CorpusWriter::Create(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->temp_path = path + ".tmp." + std::to_string(::getpid());
  std::remove(impl->temp_path.c_str());
  impl->cleanup = ScopedCleanupPath(impl->temp_path, CleanupKind::kFile);
  auto db = Database::Open(impl->temp_path, Database::Mode::kReadWriteCreate);
  if (!db.ok()) return db.status().WithContext("cannot create corpus " + path);
  impl->db.emplace(std::move(db).value());
  std::unique_ptr<CorpusWriter> writer(new CorpusWriter(std::move(impl)));
  Impl& w = *writer->impl_;
  // The file is private until Finish renames it, so a crash loses nothing worth a journal.
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536;"));
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec(kSchema));
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement insert_document,
      w.db->Prepare("INSERT INTO documents(doc_id, title, source, url, text) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT(doc_id) DO NOTHING"));
  ENVFORGE_ASSIGN_OR_RETURN(Statement insert_link,
                            w.db->Prepare("INSERT INTO links(from_id, to_id, anchor) VALUES (?, ?, ?)"));
  w.insert_document.emplace(std::move(insert_document));
  w.insert_link.emplace(std::move(insert_link));
  return writer;
}

Status CorpusWriter::Add(const Document& document) {
  Impl& w = *impl_;
  if (w.finished) return FailedPreconditionError("corpus writer: Add after Finish");
  if (document.doc_id.empty())
    return InvalidArgumentError("corpus document without a doc_id (title '" + document.title + "')");
  if (document.title.empty()) return InvalidArgumentError("corpus document '" + document.doc_id + "' has no title");
  if (document.source.empty()) return InvalidArgumentError("corpus document '" + document.doc_id + "' has no source");
  ENVFORGE_RETURN_IF_ERROR(w.BeginIfNeeded());
  ENVFORGE_RETURN_IF_ERROR(w.insert_document->Reset());
  ENVFORGE_RETURN_IF_ERROR(
      w.insert_document->BindAll({document.doc_id, document.title, document.source, document.url, document.text}));
  ENVFORGE_RETURN_IF_ERROR(w.insert_document->Run());
  if (w.db->Changes() == 0) return AlreadyExistsError("corpus document '" + document.doc_id + "' was already added");
  ENVFORGE_RETURN_IF_ERROR(w.InsertLinks(document));
  auto [entry, added] = w.sources.try_emplace(document.source);
  if (added) w.source_order.push_back(document.source);
  SourceStats& stats = entry->second;
  stats.documents += 1;
  stats.bytes += static_cast<int64_t>(document.title.size() + document.text.size());
  w.documents += 1;
  w.bytes += static_cast<int64_t>(document.title.size() + document.text.size());
  if (++w.in_transaction >= kDocumentsPerTransaction) ENVFORGE_RETURN_IF_ERROR(w.CommitPending());
  return Status::Ok();
}

int64_t CorpusWriter::documents() const { return impl_->documents; }
int64_t CorpusWriter::bytes() const { return impl_->bytes; }

Result<CorpusInfo> CorpusWriter::Finish(const std::map<std::string, double>& seconds) {
  Impl& w = *impl_;
  if (w.finished) return FailedPreconditionError("corpus writer: Finish called twice");
  w.finished = true;
  const auto start = std::chrono::steady_clock::now();
  ENVFORGE_RETURN_IF_ERROR(w.CommitPending());
  ENVFORGE_ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(*w.db));
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec("DELETE FROM links WHERE to_id NOT IN (SELECT doc_id FROM documents)"));
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec(kIndexes));
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec("INSERT INTO documents_fts(documents_fts) VALUES('rebuild')"));
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec("INSERT INTO documents_fts(documents_fts) VALUES('optimize')"));
  ENVFORGE_RETURN_IF_ERROR(w.CountLinks());
  CorpusInfo info;
  info.format_version = kCorpusFormatVersion;
  info.built_at = UtcNow();
  for (const std::string& name : w.source_order) {
    SourceStats& stats = w.sources[name];
    stats.name = name;
    if (auto it = seconds.find(name); it != seconds.end()) stats.seconds = it->second;
    info.documents += stats.documents;
    info.links += stats.links;
    info.bytes += stats.bytes;
    info.sources.push_back(stats);
  }
  ENVFORGE_RETURN_IF_ERROR(w.db->Exec("ANALYZE"));
  info.index_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ENVFORGE_RETURN_IF_ERROR(w.WriteMeta(info));
  ENVFORGE_RETURN_IF_ERROR(transaction.Commit());
  ENVFORGE_RETURN_IF_ERROR(w.Publish());
  return info;
}

// ---------------------------------------------------------------------------------------------
// CorpusReader

struct CorpusReader::Impl {
  std::string path;
  Database db;
  std::optional<Statement> by_id;
  std::optional<Statement> by_url;
  std::optional<Statement> links;

  Result<Document> ReadRow(Statement& statement, std::string_view key, std::string_view what) {
    ENVFORGE_RETURN_IF_ERROR(statement.Reset());
    ENVFORGE_RETURN_IF_ERROR(statement.Bind(1, std::string(key)));
    ENVFORGE_ASSIGN_OR_RETURN(bool row, statement.Step());
    if (!row) return NotFoundError("no document with " + std::string(what) + " '" + std::string(key) + "' in " + path);
    Document document{statement.ColumnText(0), statement.ColumnText(1), statement.ColumnText(3),
                      statement.ColumnText(2), statement.ColumnText(4), {}};
    ENVFORGE_RETURN_IF_ERROR(links->Reset());
    ENVFORGE_RETURN_IF_ERROR(links->Bind(1, document.doc_id));
    while (true) {
      ENVFORGE_ASSIGN_OR_RETURN(bool link, links->Step());
      if (!link) break;
      document.links.push_back(DocumentLink{links->ColumnText(0), links->ColumnText(1)});
    }
    return document;
  }
};

CorpusReader::CorpusReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CorpusReader::~CorpusReader() = default;

Result<std::unique_ptr<CorpusReader>> CorpusReader::Open(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return NotFoundError("corpus " + path + " does not exist");
  ENVFORGE_ASSIGN_OR_RETURN(Database db, Database::Open(path, Database::Mode::kReadOnly));
  auto version = db.Prepare("SELECT value FROM meta WHERE key = 'format_version'");
  if (!version.ok()) {
    if (version.status().code() == StatusCode::kDataLoss) return version.status();
    return InvalidArgumentError(path + " is not an envforge search corpus (no meta table)");
  }
  ENVFORGE_ASSIGN_OR_RETURN(bool row, version->Step());
  const std::string found = row ? version->ColumnText(0) : "none";
  if (found != std::to_string(kCorpusFormatVersion)) {
    return FailedPreconditionError("corpus " + path + " has format version " + found +
                                   "; this envforge reads version " + std::to_string(kCorpusFormatVersion) +
                                   " (rebuild it with envforge search corpus build)");
  }
  auto impl = std::make_unique<Impl>(Impl{path, std::move(db), {}, {}, {}});
  constexpr const char* kColumns = "SELECT doc_id, title, source, url, text FROM documents ";
  ENVFORGE_ASSIGN_OR_RETURN(Statement by_id, impl->db.Prepare(std::string(kColumns) + "WHERE doc_id = ?"));
  ENVFORGE_ASSIGN_OR_RETURN(Statement by_url,
                            impl->db.Prepare(std::string(kColumns) + "WHERE url = ? ORDER BY id LIMIT 1"));
  ENVFORGE_ASSIGN_OR_RETURN(Statement links,
                            impl->db.Prepare("SELECT to_id, anchor FROM links WHERE from_id = ? ORDER BY rowid"));
  impl->by_id.emplace(std::move(by_id));
  impl->by_url.emplace(std::move(by_url));
  impl->links.emplace(std::move(links));
  return std::unique_ptr<CorpusReader>(new CorpusReader(std::move(impl)));
}

Result<Document> CorpusReader::Get(std::string_view doc_id) { return impl_->ReadRow(*impl_->by_id, doc_id, "doc_id"); }

Result<Document> CorpusReader::GetByUrl(std::string_view url) { return impl_->ReadRow(*impl_->by_url, url, "url"); }

Result<CorpusInfo> CorpusReader::Info() {
  ENVFORGE_ASSIGN_OR_RETURN(Statement meta, impl_->db.Prepare("SELECT key, value FROM meta"));
  std::map<std::string, std::string> values;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, meta.Step());
    if (!row) break;
    values[meta.ColumnText(0)] = meta.ColumnText(1);
  }
  CorpusInfo info;
  try {
    info.format_version = std::stoi(values["format_version"]);
    info.documents = std::stoll(values["documents"]);
    info.links = std::stoll(values["links"]);
    info.bytes = std::stoll(values["bytes"]);
    info.index_seconds = values.count("index_seconds") ? std::stod(values["index_seconds"]) : 0.0;
  } catch (const std::exception&) {
    return DataLossError("corpus " + impl_->path + ": meta holds a malformed count");
  }
  info.built_at = values["built_at"];
  ENVFORGE_ASSIGN_OR_RETURN(Json sources, ParseJson(values["sources"], "corpus meta 'sources'"));
  if (!sources.is_array()) return DataLossError("corpus " + impl_->path + ": meta 'sources' is not an array");
  for (const Json& entry : sources) {
    ENVFORGE_ASSIGN_OR_RETURN(SourceStats stats, SourceStatsFromJson(entry));
    info.sources.push_back(std::move(stats));
  }
  return info;
}

Database& CorpusReader::database() { return impl_->db; }

}  // namespace envforge::search
