// The one interface every search backend implements, and the values it speaks in.
//
// A search environment's session tools (`search`, `open`, `find`) are backend-independent: they
// call a SearchBackend, which is the offline FTS5 corpus (offline_backend.h) or, later, a live
// web API client. Every backend normalises its answers to these types, so a recorded response
// replays the same whatever produced it. `find` needs no backend: find_in_document.h works on a
// Document.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"

namespace envforge::search {

struct SearchQuery {
  std::string text;  // what the user or agent typed; never interpreted as backend syntax
  int top_k = 10;    // how many hits to return at most; backends document their own bounds
};

struct SearchHit {
  std::string doc_id;  // what Open() accepts
  std::string title;
  std::string url;      // may equal doc_id for documents without a natural address
  std::string snippet;  // a short excerpt around the matched terms; matches marked **like this**
  double score = 0;     // backend-specific relevance; higher is better within one page only
};

struct SearchPage {
  std::string query;            // the query text as received
  std::vector<SearchHit> hits;  // best first; empty when nothing matched (not an error)
};

// A hyperlink or cross reference from one document to another.
struct DocumentLink {
  std::string target;  // the target's doc_id (offline corpora) or URL (web backends)
  std::string anchor;  // the link's text, or the relation's name ("hypernym"); may be empty
};

struct Document {
  std::string doc_id;
  std::string title;
  std::string url;
  std::string source;  // where it came from: "gcide", "wordnet", "python-doc", "brave", ...
  std::string text;    // plain text, UTF-8
  std::vector<DocumentLink> links;
};

// The interface. Implementations are not required to be thread-safe: one session (one thread
// at a time) owns a backend; a server opens one backend per worker thread or serialises calls.
class SearchBackend {
 public:
  virtual ~SearchBackend() = default;

  // The best hits for query.text, at most query.top_k. Errors: InvalidArgument for an empty
  // query or a top_k outside the backend's bounds (the message names which); Unavailable or
  // DeadlineExceeded for a backend that cannot be reached; DataLoss for a corrupt local corpus.
  // A query that matches nothing is an empty page, not an error.
  virtual Result<SearchPage> Search(const SearchQuery& query) = 0;

  // The whole document with this doc_id or stored URL. NotFound naming it when there is none.
  virtual Result<Document> Open(std::string_view doc_id_or_url) = 0;

  // A short stable name: "offline", "brave", ... (recorded with every response).
  virtual std::string name() const = 0;
};

// JSON forms, for tool results and `envforge search --json`:
//   SearchHit  -> {"doc_id", "title", "url", "snippet", "score"}
//   SearchPage -> {"query", "hits": [SearchHit...]}
//   Document   -> {"doc_id", "title", "url", "source", "text", "links": [{"target", "anchor"}]}
Json ToJson(const SearchHit& hit);
Json ToJson(const SearchPage& page);
Json ToJson(const Document& document);

}  // namespace envforge::search
