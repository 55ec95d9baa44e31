#include "toolsets/search/wordnet_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <unordered_map>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

#include "base/fd.h"

namespace envforge::search {
namespace {

struct Pointer {
  std::string symbol;
  std::string target_id;  // "wordnet:n02083346"
};

struct Synset {
  std::string doc_id;
  char pos = 'n';  // of its file: n, v, a, r
  int lex_filenum = 0;
  std::vector<std::string> lemmas;
  std::vector<Pointer> pointers;
  std::string gloss;
};

// lexnames(5): the lexicographer file of each lex_filenum.
std::string_view LexName(int number) {
  static constexpr std::string_view kNames[] = {"adj.all",          "adj.pert",           "adv.all",
                                                "noun.Tops",        "noun.act",           "noun.animal",
                                                "noun.artifact",    "noun.attribute",     "noun.body",
                                                "noun.cognition",   "noun.communication", "noun.event",
                                                "noun.feeling",     "noun.food",          "noun.group",
                                                "noun.location",    "noun.motive",        "noun.object",
                                                "noun.person",      "noun.phenomenon",    "noun.plant",
                                                "noun.possession",  "noun.process",       "noun.quantity",
                                                "noun.relation",    "noun.shape",         "noun.state",
                                                "noun.substance",   "noun.time",          "verb.body",
                                                "verb.change",      "verb.cognition",     "verb.communication",
                                                "verb.competition", "verb.consumption",   "verb.contact",
                                                "verb.creation",    "verb.emotion",       "verb.motion",
                                                "verb.perception",  "verb.possession",    "verb.social",
                                                "verb.stative",     "verb.weather",       "adj.ppl"};
  return number >= 0 && number < static_cast<int>(std::size(kNames)) ? kNames[number] : "unknown";
}

std::string_view PosName(char pos) {
  switch (pos) {
    case 'n': return "noun";
    case 'v': return "verb";
    case 'a': return "adjective";
    default: return "adverb";
  }
}

// wninput(5)'s pointer symbols.
std::string RelationName(const std::string& symbol, char pos) {
  static const std::map<std::string, std::string> kNames = {{"!", "antonym"},
                                                            {"@", "hypernym"},
                                                            {"@i", "instance hypernym"},
                                                            {"~", "hyponym"},
                                                            {"~i", "instance hyponym"},
                                                            {"#m", "member holonym"},
                                                            {"#s", "substance holonym"},
                                                            {"#p", "part holonym"},
                                                            {"%m", "member meronym"},
                                                            {"%s", "substance meronym"},
                                                            {"%p", "part meronym"},
                                                            {"=", "attribute"},
                                                            {"+", "derivationally related form"},
                                                            {";c", "topic domain"},
                                                            {"-c", "member of topic domain"},
                                                            {";r", "region domain"},
                                                            {"-r", "member of region domain"},
                                                            {";u", "usage domain"},
                                                            {"-u", "member of usage domain"},
                                                            {"*", "entailment"},
                                                            {">", "cause"},
                                                            {"^", "also see"},
                                                            {"$", "verb group"},
                                                            {"&", "similar to"},
                                                            {"<", "participle of verb"}};
  if (symbol == "\\") return pos == 'r' ? "derived from adjective" : "pertainym";
  auto it = kNames.find(symbol);
  return it == kNames.end() ? "related (" + symbol + ")" : it->second;
}

// "Canis_familiaris" -> "Canis familiaris"; "galore(ip)" -> "galore" (adjective markers).
std::string CleanLemma(std::string word) {
  if (const size_t paren = word.find('('); paren != std::string::npos && word.back() == ')') word.resize(paren);
  for (char& c : word) {
    if (c == '_') c = ' ';
  }
  return word;
}

// Parses one data line; the error text is completed by the caller with file and line.
Result<Synset> ParseLine(std::string_view line, char pos) {
  const size_t bar = line.find('|');
  if (bar == std::string_view::npos) return DataLossError("no '|' before the gloss");
  std::istringstream fields{std::string(line.substr(0, bar))};
  Synset synset;
  std::string offset, lex_filenum, ss_type, w_cnt_hex, p_cnt;
  if (!(fields >> offset >> lex_filenum >> ss_type >> w_cnt_hex)) return DataLossError("truncated synset header");
  synset.doc_id = std::string("wordnet:") + pos + offset;
  synset.pos = pos;
  synset.lex_filenum = std::atoi(lex_filenum.c_str());
  const long w_cnt = std::strtol(w_cnt_hex.c_str(), nullptr, 16);
  for (long i = 0; i < w_cnt; ++i) {
    std::string word, lex_id;
    if (!(fields >> word >> lex_id)) return DataLossError("fewer words than w_cnt");
    synset.lemmas.push_back(CleanLemma(std::move(word)));
  }
  if (!(fields >> p_cnt) || synset.lemmas.empty()) return DataLossError("no pointer count or no word");
  for (long i = 0, n = std::atol(p_cnt.c_str()); i < n; ++i) {
    std::string symbol, target, target_pos, source_target;
    if (!(fields >> symbol >> target >> target_pos >> source_target) || target_pos.size() != 1) {
      return DataLossError("fewer pointers than p_cnt");
    }
    const char file_pos = target_pos[0] == 's' ? 'a' : target_pos[0];
    synset.pointers.push_back(Pointer{symbol, std::string("wordnet:") + file_pos + target});
  }
  std::string_view gloss = line.substr(bar + 1);
  while (!gloss.empty() && gloss.front() == ' ') gloss.remove_prefix(1);
  while (!gloss.empty() && (gloss.back() == ' ' || gloss.back() == '\r')) gloss.remove_suffix(1);
  synset.gloss = std::string(gloss);
  return synset;
}

Status ParseFile(const std::string& path, char pos, std::vector<Synset>& synsets) {
  ENVFORGE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  size_t start = 0, line_number = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line = std::string_view(text).substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (line.empty() || line.starts_with("  ")) continue;  // the licence header
    Result<Synset> synset = ParseLine(line, pos);
    if (!synset.ok()) return DataLossError(path + ":" + std::to_string(line_number) + ": " + synset.status().message());
    synsets.push_back(std::move(synset).value());
  }
  return Status::Ok();
}

std::string Join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string joined;
  for (const std::string& part : parts) joined += (joined.empty() ? "" : std::string(separator)) + part;
  return joined;
}

Document Render(const Synset& synset, const std::unordered_map<std::string, const Synset*>& by_id) {
  Document document{synset.doc_id, Join(synset.lemmas, ", "), synset.doc_id, "wordnet", {}, {}};
  document.text = document.title + "\n" + std::string(PosName(synset.pos)) + " (" +
                  std::string(LexName(synset.lex_filenum)) + ")\n" + synset.gloss + "\n";
  // Relations in the order they first appear; targets once each.
  std::vector<std::pair<std::string, std::vector<std::string>>> relations;
  for (const Pointer& pointer : synset.pointers) {
    auto target = by_id.find(pointer.target_id);
    if (target == by_id.end()) continue;
    const std::string relation = RelationName(pointer.symbol, synset.pos);
    const std::string& lemma = target->second->lemmas.front();
    document.links.push_back(DocumentLink{pointer.target_id, relation + ": " + lemma});
    auto group = std::find_if(relations.begin(), relations.end(), [&](const auto& r) { return r.first == relation; });
    if (group == relations.end()) group = relations.insert(relations.end(), {relation, {}});
    if (std::find(group->second.begin(), group->second.end(), lemma) == group->second.end())
      group->second.push_back(lemma);
  }
  for (const auto& [relation, lemmas] : relations) document.text += relation + ": " + Join(lemmas, " | ") + "\n";
  document.text.pop_back();
  return document;
}

}  // namespace

Status ReadWordNet(const std::string& dir, const DocumentSink& sink) {
  static constexpr std::pair<const char*, char> kFiles[] = {
      {"data.noun", 'n'}, {"data.verb", 'v'}, {"data.adj", 'a'}, {"data.adv", 'r'}};
  std::vector<Synset> synsets;
  bool any = false;
  for (const auto& [file, pos] : kFiles) {
    const std::string path = dir + "/" + file;
    if (::access(path.c_str(), F_OK) != 0) continue;
    any = true;
    ENVFORGE_RETURN_IF_ERROR(ParseFile(path, pos, synsets));
  }
  if (!any) return NotFoundError("no WordNet data files (data.noun, data.verb, data.adj, data.adv) in " + dir);
  std::unordered_map<std::string, const Synset*> by_id;
  for (const Synset& synset : synsets) by_id.emplace(synset.doc_id, &synset);
  for (const Synset& synset : synsets) ENVFORGE_RETURN_IF_ERROR(sink(Render(synset, by_id)));
  return Status::Ok();
}

}  // namespace envforge::search
