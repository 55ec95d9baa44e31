// The corpus file of the offline search backend: one SQLite database holding documents, the
// links between them, an FTS5 index over title and text, and a meta table.
//
// Schema (format version 1):
//
//   meta(key TEXT PRIMARY KEY, value TEXT)
//       format_version "1", built_at (ISO 8601 UTC), documents, links, bytes, index_seconds,
//       sources (JSON array of {name, documents, links, bytes, seconds})
//   documents(id INTEGER PRIMARY KEY, doc_id TEXT NOT NULL UNIQUE, title, source, url, text)
//       doc_id is the key callers use; `id` exists only because an external-content FTS5 table
//       needs an integer rowid that VACUUM never renumbers, which only an INTEGER PRIMARY KEY
//       guarantees. url is indexed but need not be unique; title is indexed COLLATE NOCASE (the
//       backend puts exact-title matches first).
//   links(from_id, to_id, anchor)      indexed on from_id and on to_id; every to_id is a doc_id
//                                      of the corpus (links to absent documents are dropped)
//   documents_fts USING fts5(title, text, content='documents', content_rowid='id',
//                            tokenize='porter unicode61 remove_diacritics 2')
//
// Why external content: the corpus is written once and read many times, and snippet() needs the
// original text. An external-content table reads it from `documents`, so the text is stored once
// (a normal FTS5 table would store it twice). Contentless tables cannot produce snippets, and
// contentless_delete needs SQLite 3.43 (Debian bookworm has 3.40). The price of external
// content, keeping index and table in step on updates, does not arise: the index is built once,
// after the last insert, with FTS5's 'rebuild', then merged with 'optimize'.
//
// Thread safety: a writer or reader belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/sqlite.h"
#include "base/status.h"
#include "toolsets/search/search_backend.h"

namespace envforge::search {

inline constexpr int kCorpusFormatVersion = 1;

// Where a corpus source (a dictd database, WordNet, ...) delivers its documents, one at a time; a
// non-OK Status stops the source and is returned by it. CorpusWriter::Add is the usual sink.
using DocumentSink = std::function<Status(const Document&)>;

// What one source contributed to a corpus.
struct SourceStats {
  std::string name;  // "gcide", "wordnet", ...
  int64_t documents = 0;
  int64_t links = 0;   // links kept (those whose target is in the corpus)
  int64_t bytes = 0;   // bytes of title and text stored
  double seconds = 0;  // time spent reading the source and inserting its documents
};

struct CorpusInfo {
  int format_version = 0;
  std::string built_at;  // ISO 8601 UTC, "2025-11-25T12:00:00Z"
  int64_t documents = 0;
  int64_t links = 0;
  int64_t bytes = 0;         // bytes of title and text stored, all sources
  double index_seconds = 0;  // Finish(): dropping dangling links, indexes, FTS5 rebuild and optimize
  std::vector<SourceStats> sources;
};

Json ToJson(const SourceStats& stats);
Json ToJson(const CorpusInfo& info);

// Writes a new corpus. Documents go in with Add() (inside transactions of
// kDocumentsPerTransaction documents); Finish() drops links to absent documents, builds the
// secondary indexes and the FTS5 index, writes meta and publishes the file.
//
// The file is written at "<path>.tmp.<pid>" and renamed over `path` by Finish(), so `path` is
// always either what it was before or a complete corpus. Destroying a writer that did not
// finish removes the temporary file (and a SIGINT/SIGTERM does too once the program installed
// base/cleanup_registry.h's handlers).
class CorpusWriter {
 public:
  static constexpr int64_t kDocumentsPerTransaction = 50'000;

  // Errors: the temporary file cannot be created (its errno's code, e.g. NotFound for a missing
  // directory, PermissionDenied).
  static Result<std::unique_ptr<CorpusWriter>> Create(const std::string& path);
  ~CorpusWriter();
  CorpusWriter(const CorpusWriter&) = delete;
  CorpusWriter& operator=(const CorpusWriter&) = delete;

  // Stores one document and its links (duplicate links of one document are stored once).
  // Errors: InvalidArgument for an empty doc_id, title or source; AlreadyExists for a doc_id
  // already stored; FailedPrecondition after Finish().
  Status Add(const Document& document);

  // Running totals of what Add() stored (links before dangling ones are dropped).
  int64_t documents() const;
  int64_t bytes() const;

  // Completes and publishes the corpus. `seconds` gives each source's build time (sources not
  // named count 0 seconds). Per-source documents, links and bytes are counted by the writer
  // itself; sources are listed in the order of their first document. Returns what meta now says. After Finish
  // (successful or not) the writer accepts nothing more.
  Result<CorpusInfo> Finish(const std::map<std::string, double>& seconds = {});

 private:
  struct Impl;
  explicit CorpusWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Reads a corpus written by CorpusWriter.
class CorpusReader {
 public:
  // Opens read-only. Errors: NotFound for a missing file; InvalidArgument for a file that is not
  // an envforge corpus (no meta table); FailedPrecondition for another format version; DataLoss
  // for a corrupt file.
  static Result<std::unique_ptr<CorpusReader>> Open(const std::string& path);
  ~CorpusReader();
  CorpusReader(const CorpusReader&) = delete;
  CorpusReader& operator=(const CorpusReader&) = delete;

  // The document with this doc_id, with its links. NotFound naming it when absent.
  Result<Document> Get(std::string_view doc_id);
  // The first document (lowest id) stored with this url. NotFound naming it when absent.
  Result<Document> GetByUrl(std::string_view url);
  Result<CorpusInfo> Info();

  // The open connection, for queries of the offline backend. Owned by the reader.
  Database& database();

 private:
  struct Impl;
  explicit CorpusReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace envforge::search
