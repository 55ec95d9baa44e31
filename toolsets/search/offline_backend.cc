#include "toolsets/search/offline_backend.h"

#include <set>
#include <utility>
#include <vector>

#include "toolsets/search/fts_query.h"

namespace envforge::search {

struct OfflineSearchBackend::Statements {
  Statement exact_title;  // ids of documents titled exactly like the query
  Statement ranked;       // ids matching an FTS5 expression, best bm25 first
  Statement detail;       // one matching document's fields, score and snippet
  Statement plain;        // one document's fields without a match (its title matched, its text not)
};

namespace {

// A document row found for a page.
struct Ranked {
  int64_t id = 0;
  double score = 0;  // -bm25 under the expression that found it
};

// Snippet, score and ranking must agree on the weights; one place spells them.
std::string Bm25Call() {
  return "bm25(documents_fts, " + std::to_string(OfflineSearchBackend::kTitleWeight) + ", 1.0)";
}

// Rows of `statement` as (id, score): column 0 the id, column 1 its bm25 value.
Result<std::vector<Ranked>> Rows(Statement& statement, const std::vector<SqlValue>& values) {
  ENVFORGE_RETURN_IF_ERROR(statement.Reset());
  ENVFORGE_RETURN_IF_ERROR(statement.BindAll(values));
  std::vector<Ranked> rows;
  while (true) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, statement.Step());
    if (!row) break;
    rows.push_back(Ranked{statement.ColumnInt(0), -statement.ColumnDouble(1)});
  }
  return rows;
}

// Appends the rows not yet taken until `page` holds `limit`.
void Merge(std::vector<Ranked>& page, std::set<int64_t>& taken, const std::vector<Ranked>& more, size_t limit) {
  for (const Ranked& row : more) {
    if (page.size() >= limit) return;
    if (taken.insert(row.id).second) page.push_back(row);
  }
}

// The hit for a ranked row, its snippet from `match`. Every row a page holds matches `match` (the
// any-term expression); the opening text stands in should the row have changed under us.
Result<SearchHit> HitFor(Statement& detail, Statement& plain, const std::string& match, const Ranked& ranked) {
  ENVFORGE_RETURN_IF_ERROR(detail.Reset());
  ENVFORGE_RETURN_IF_ERROR(detail.BindAll({match, ranked.id}));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, detail.Step());
  if (row) {
    return SearchHit{detail.ColumnText(0), detail.ColumnText(1), detail.ColumnText(2), detail.ColumnText(4),
                     ranked.score};
  }
  const int64_t id = ranked.id;
  ENVFORGE_RETURN_IF_ERROR(plain.Reset());
  ENVFORGE_RETURN_IF_ERROR(plain.Bind(1, id));
  ENVFORGE_ASSIGN_OR_RETURN(bool found, plain.Step());
  if (!found) return DataLossError("corpus index names document row " + std::to_string(id) + ", which does not exist");
  return SearchHit{plain.ColumnText(0), plain.ColumnText(1), plain.ColumnText(2), plain.ColumnText(3), ranked.score};
}

}  // namespace

OfflineSearchBackend::OfflineSearchBackend(std::unique_ptr<CorpusReader> reader, std::unique_ptr<Statements> statements)
    : reader_(std::move(reader)), statements_(std::move(statements)) {}

OfflineSearchBackend::~OfflineSearchBackend() = default;

Result<std::unique_ptr<OfflineSearchBackend>> OfflineSearchBackend::OpenCorpus(const std::string& corpus_path) {
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<CorpusReader> reader, CorpusReader::Open(corpus_path));
  Database& db = reader->database();
  // Title matches are ranked among themselves by the any-term expression (?1), which every one
  // of them matches: its title holds all the query's words.
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement exact_title,
      db.Prepare("SELECT rowid, " + Bm25Call() +
                 " AS score FROM documents_fts WHERE documents_fts MATCH ?1 AND rowid IN "
                 "(SELECT id FROM documents WHERE title = ?2 COLLATE NOCASE) ORDER BY score, rowid LIMIT ?3"));
  ENVFORGE_ASSIGN_OR_RETURN(Statement ranked, db.Prepare("SELECT rowid, " + Bm25Call() +
                                                         " AS score FROM documents_fts WHERE documents_fts MATCH ?1 "
                                                         "ORDER BY score, rowid LIMIT ?2"));
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement detail, db.Prepare("SELECT d.doc_id, d.title, d.url, " + Bm25Call() +
                                   ", snippet(documents_fts, 1, '**', '**', '…', " + std::to_string(kSnippetTokens) +
                                   ") FROM documents_fts JOIN documents d ON d.id = documents_fts.rowid "
                                   "WHERE documents_fts MATCH ?1 AND documents_fts.rowid = ?2"));
  ENVFORGE_ASSIGN_OR_RETURN(Statement plain,
                            db.Prepare("SELECT doc_id, title, url, substr(text, 1, 160) FROM documents WHERE id = ?1"));
  auto statements = std::make_unique<Statements>(
      Statements{std::move(exact_title), std::move(ranked), std::move(detail), std::move(plain)});
  return std::unique_ptr<OfflineSearchBackend>(new OfflineSearchBackend(std::move(reader), std::move(statements)));
}

Result<SearchPage> OfflineSearchBackend::Search(const SearchQuery& query) {
  if (query.top_k < 1 || query.top_k > kMaxTopK) {
    return InvalidArgumentError("search top_k must be between 1 and " + std::to_string(kMaxTopK) + ", got " +
                                std::to_string(query.top_k));
  }
  ENVFORGE_ASSIGN_OR_RETURN(FtsQuery fts, TranslateQuery(query.text));
  const auto limit = static_cast<size_t>(query.top_k);
  Statements& s = *statements_;
  std::vector<Ranked> ranked;
  std::set<int64_t> taken;
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<Ranked> exact,
                            Rows(s.exact_title, {fts.any_term, fts.plain_text, int64_t{query.top_k}}));
  Merge(ranked, taken, exact, limit);
  // Enough ranked rows to fill the page even when some are exact-title hits already.
  const int64_t wanted = query.top_k + static_cast<int64_t>(exact.size());
  ENVFORGE_ASSIGN_OR_RETURN(std::vector<Ranked> all, Rows(s.ranked, {fts.all_terms, wanted}));
  Merge(ranked, taken, all, limit);
  if (ranked.size() < limit && fts.any_term != fts.all_terms) {
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<Ranked> any,
                              Rows(s.ranked, {fts.any_term, wanted + static_cast<int64_t>(all.size())}));
    Merge(ranked, taken, any, limit);
  }
  // Snippets mark every content term, whichever expression found the hit.
  SearchPage page{query.text, {}};
  for (const Ranked& row : ranked) {
    ENVFORGE_ASSIGN_OR_RETURN(SearchHit hit, HitFor(s.detail, s.plain, fts.any_term, row));
    page.hits.push_back(std::move(hit));
  }
  return page;
}

Result<Document> OfflineSearchBackend::Open(std::string_view doc_id_or_url) {
  if (doc_id_or_url.empty()) return InvalidArgumentError("open: the document id or url is empty");
  Result<Document> by_id = reader_->Get(doc_id_or_url);
  if (by_id.ok() || by_id.status().code() != StatusCode::kNotFound) return by_id;
  Result<Document> by_url = reader_->GetByUrl(doc_id_or_url);
  if (by_url.ok() || by_url.status().code() != StatusCode::kNotFound) return by_url;
  return NotFoundError("no document with id or url '" + std::string(doc_id_or_url) + "' in the corpus");
}

}  // namespace envforge::search
