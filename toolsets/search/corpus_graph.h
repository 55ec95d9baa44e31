// A corpus (corpus_store.h) as a link graph for question synthesis (qa_synth.h): every document's
// doc_id, title and source and every link, in memory; documents' texts, word frequencies and
// all-words matches read from the corpus on demand (through its FTS5 index).
//
// Links are deduplicated per (from, to) for in-link counts, self-links dropped, and each keeps
// the relation its anchor names (RelationOf). Memory: about 100 bytes per document and 16 per
// link (the full Debian corpus, 273k documents and 523k links: tens of MB).
//
// Thread safety: one thread at a time (one SQLite connection).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "toolsets/search/corpus_store.h"

namespace envforge::search {

using DocIndex = int32_t;  // a document's position in the corpus (its order of insertion)

// The relation a link's anchor names: "hypernym" for "hypernym: canine" (lower-case words before
// ": ", at most 40 bytes); "" for a plain cross reference (an anchor that is the target's name:
// "He", "noble gas").
std::string RelationOf(std::string_view anchor);
// What an anchor calls its target: the part after a relation's "name: ", else all of it.
std::string AnchorName(std::string_view anchor);

class CorpusGraph {
 public:
  struct Edge {
    DocIndex to = 0;
    int32_t relation = 0;  // relation(id): "" for a plain cross reference
  };

  // Reads titles and links of the corpus at `path`. Errors: those of CorpusReader::Open
  // (NotFound for a missing file, InvalidArgument for a file that is not a corpus), DataLoss.
  static Result<std::unique_ptr<CorpusGraph>> Load(const std::string& path);
  ~CorpusGraph();

  size_t size() const { return doc_ids_.size(); }
  int64_t links() const { return links_; }
  const std::string& doc_id(DocIndex doc) const { return doc_ids_[doc]; }
  const std::string& title(DocIndex doc) const { return titles_[doc]; }
  const std::string& source(DocIndex doc) const { return sources_[doc]; }
  const std::string& relation(int32_t id) const { return relations_[id]; }
  // True when some link of the corpus has this relation (WordNet texts list their links as lines
  // of "relation: target").
  bool IsRelation(const std::string& name) const;
  // Distinct documents linking to `doc`: its rarity (lower is rarer).
  int32_t inlinks(DocIndex doc) const { return inlinks_[doc]; }
  const std::vector<Edge>& out(DocIndex doc) const { return out_[doc]; }

  // The document's text (cached). Errors: the corpus's.
  Result<std::string> Text(DocIndex doc);
  // How many documents contain `word` after the index's stemming (cached).
  Result<int64_t> DocumentFrequency(const std::string& word);
  // The documents containing every word (the index's all-terms query), in corpus order, at most
  // `limit` of them.
  Result<std::vector<DocIndex>> MatchAll(const std::vector<std::string>& words, size_t limit);
  // The names other documents link to `doc` with (AnchorName of each distinct anchor, at most 64).
  Result<std::vector<std::string>> AnchorNames(DocIndex doc);

 private:
  CorpusGraph() = default;
  std::unique_ptr<CorpusReader> reader_;
  std::vector<std::string> doc_ids_, titles_, sources_;
  std::unordered_map<std::string, DocIndex> index_;
  std::vector<std::vector<Edge>> out_;
  std::vector<int32_t> inlinks_;
  std::vector<std::string> relations_;
  int64_t links_ = 0;
  std::unordered_map<DocIndex, std::string> texts_;
  std::unordered_map<std::string, int64_t> frequency_;
};

}  // namespace envforge::search
