// A corpus as a link graph (corpus_graph.h).
#include "toolsets/search/corpus_graph.h"

#include <algorithm>
#include <cctype>

namespace envforge::search {

// The relation a link's anchor names: "hypernym" for "hypernym: canine"; "" for a plain cross
// reference (an anchor that is the target's name, "He", "noble gas").
std::string RelationOf(std::string_view anchor) {
  size_t colon = anchor.find(": ");
  if (colon == std::string_view::npos || colon == 0 || colon > 40) return "";
  for (char c : anchor.substr(0, colon)) {
    if (!(std::islower(static_cast<unsigned char>(c)) || c == ' ')) return "";
  }
  return std::string(anchor.substr(0, colon));
}

// What an anchor calls its target: the part after a relation's "name: ", else all of it.
std::string AnchorName(std::string_view anchor) {
  std::string relation = RelationOf(anchor);
  return std::string(relation.empty() ? anchor : anchor.substr(relation.size() + 2));
}

CorpusGraph::~CorpusGraph() = default;

Result<std::unique_ptr<CorpusGraph>> CorpusGraph::Load(const std::string& path) {
  auto graph = std::unique_ptr<CorpusGraph>(new CorpusGraph());
  ENVFORGE_ASSIGN_OR_RETURN(graph->reader_, CorpusReader::Open(path));
  Database& db = graph->reader_->database();
  ENVFORGE_ASSIGN_OR_RETURN(Statement docs, db.Prepare("SELECT doc_id, title, source FROM documents ORDER BY id"));
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, docs.Step());
    if (!row) break;
    graph->index_.emplace(docs.ColumnText(0), static_cast<DocIndex>(graph->doc_ids_.size()));
    graph->doc_ids_.push_back(docs.ColumnText(0));
    graph->titles_.push_back(docs.ColumnText(1));
    graph->sources_.push_back(docs.ColumnText(2));
  }
  graph->out_.resize(graph->doc_ids_.size());
  graph->inlinks_.assign(graph->doc_ids_.size(), 0);
  graph->relations_.push_back("");
  std::unordered_map<std::string, int32_t> relation_ids{{"", 0}};
  ENVFORGE_ASSIGN_OR_RETURN(Statement links, db.Prepare("SELECT from_id, to_id, anchor FROM links ORDER BY rowid"));
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, links.Step());
    if (!row) break;
    auto from = graph->index_.find(links.ColumnText(0));
    auto to = graph->index_.find(links.ColumnText(1));
    if (from == graph->index_.end() || to == graph->index_.end() || from->second == to->second) continue;
    std::string relation = RelationOf(links.ColumnText(2));
    auto [it, added] = relation_ids.emplace(relation, static_cast<int32_t>(graph->relations_.size()));
    if (added) graph->relations_.push_back(relation);
    auto& edges = graph->out_[from->second];
    bool seen = std::any_of(edges.begin(), edges.end(), [&](const Edge& e) { return e.to == to->second; });
    if (!seen) ++graph->inlinks_[to->second];
    edges.push_back({to->second, it->second});
    ++graph->links_;
  }
  return graph;
}

Result<std::string> CorpusGraph::Text(DocIndex doc) {
  if (auto it = texts_.find(doc); it != texts_.end()) return it->second;
  ENVFORGE_ASSIGN_OR_RETURN(Document document, reader_->Get(doc_ids_[doc]));
  return texts_.emplace(doc, std::move(document.text)).first->second;
}

Result<int64_t> CorpusGraph::DocumentFrequency(const std::string& word) {
  if (auto it = frequency_.find(word); it != frequency_.end()) return it->second;
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt, reader_->database().Prepare("SELECT count(*) FROM documents_fts WHERE documents_fts MATCH ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({"\"" + word + "\""}));
  ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  int64_t count = row ? stmt.ColumnInt(0) : 0;
  frequency_.emplace(word, count);
  return count;
}

Result<std::vector<DocIndex>> CorpusGraph::MatchAll(const std::vector<std::string>& words, size_t limit) {
  std::string expression;
  for (const std::string& word : words) expression += (expression.empty() ? "\"" : " \"") + word + "\"";
  ENVFORGE_ASSIGN_OR_RETURN(Statement stmt,
                            reader_->database().Prepare("SELECT d.doc_id FROM documents_fts JOIN documents d ON d.id = "
                                                        "documents_fts.rowid WHERE documents_fts MATCH ? LIMIT ?"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({expression, static_cast<int64_t>(limit)}));
  std::vector<DocIndex> docs;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    if (auto it = index_.find(stmt.ColumnText(0)); it != index_.end()) docs.push_back(it->second);
  }
  std::sort(docs.begin(), docs.end());
  return docs;
}

Result<std::vector<std::string>> CorpusGraph::AnchorNames(DocIndex doc) {
  ENVFORGE_ASSIGN_OR_RETURN(
      Statement stmt,
      reader_->database().Prepare("SELECT DISTINCT anchor FROM links WHERE to_id = ? ORDER BY anchor LIMIT 64"));
  ENVFORGE_RETURN_IF_ERROR(stmt.BindAll({doc_ids_[doc]}));
  std::vector<std::string> names;
  for (;;) {
    ENVFORGE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    std::string name = AnchorName(stmt.ColumnText(0));
    if (!name.empty()) names.push_back(std::move(name));
  }
  return names;
}

bool CorpusGraph::IsRelation(const std::string& name) const {
  return std::find(relations_.begin(), relations_.end(), name) != relations_.end();
}

}  // namespace envforge::search
