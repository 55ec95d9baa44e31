// The offline search backend: SQLite FTS5 over a corpus file (corpus_store.h), the default
// backend of search environments (no network, deterministic).
//
// Ranking, in three tiers: documents whose title equals the query's words (case-insensitively);
// then documents matching every term; then, when those are fewer than top_k, documents matching
// any content term (the query without its common words: "the", "of", "what", ...). Within a tier,
// by bm25 with the title weighted kTitleWeight times the text; ties in corpus order, so a query
// always gets the same page from the same corpus, and a smaller top_k the first hits of a larger
// one. A hit's score is -bm25 under the expression of its tier (any content term for title
// matches): higher is better, but a lower tier may hold a higher score than the tier above it.
//
// Query language (fts_query.h): words, "quoted phrases", prefix terms (`electro*`, at least
// kMinPrefixBytes before the '*'). Nothing else the user types has a meaning; no input can cause
// an FTS5 syntax error or reach SQL.
//
// Snippets: FTS5 snippet() over the text column, at most kSnippetTokens tokens, matched terms
// marked **like this**, elisions shown as "…". A document whose text has no matched term (a
// title-only match) gets the start of its text.
//
// Thread safety: one thread at a time (one SQLite connection).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"
#include "toolsets/search/search_backend.h"

namespace envforge::search {

class OfflineSearchBackend : public SearchBackend {
 public:
  static constexpr int kMaxTopK = 100;
  static constexpr double kTitleWeight = 5.0;
  static constexpr int kSnippetTokens = 24;

  // Opens the corpus read-only. Errors: those of CorpusReader::Open.
  static Result<std::unique_ptr<OfflineSearchBackend>> OpenCorpus(const std::string& corpus_path);
  ~OfflineSearchBackend() override;

  // Errors: InvalidArgument for an empty query (fts_query.h) or top_k outside 1..kMaxTopK;
  // DataLoss for a corrupt corpus.
  Result<SearchPage> Search(const SearchQuery& query) override;
  // By doc_id first, then by stored url. NotFound naming it.
  Result<Document> Open(std::string_view doc_id_or_url) override;
  std::string name() const override { return "offline"; }

  CorpusReader& corpus() { return *reader_; }

 private:
  struct Statements;
  OfflineSearchBackend(std::unique_ptr<CorpusReader> reader, std::unique_ptr<Statements> statements);
  std::unique_ptr<CorpusReader> reader_;
  std::unique_ptr<Statements> statements_;
};

}  // namespace envforge::search
