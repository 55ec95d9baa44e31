// Offline multi-hop question synthesis over a corpus (qa_synth.h).
#include "toolsets/search/qa_synth.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/rng.h"
#include "toolsets/search/corpus_graph.h"
#include "toolsets/search/offline_backend.h"
#include "toolsets/search/search_toolbox.h"
#include "toolsets/search_tools.h"

namespace envforge::search {
namespace {

using Clock = std::chrono::steady_clock;

// The most documents one clue may match and still be followed by the uniqueness check.
constexpr size_t kMaxCandidates = 5000;
// Longer titles make no answer (a sentence is no headword).
constexpr size_t kMaxNameBytes = 200;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

const std::unordered_set<std::string>& StopWords() {
  static const std::unordered_set<std::string> kWords = {
      "the",     "and",   "for",       "with",    "that",    "this",    "from",      "into",   "are",   "was",
      "were",    "has",   "have",      "had",     "not",     "but",     "its",       "it's",   "any",   "all",
      "one",     "two",   "may",       "can",     "used",    "use",     "such",      "also",   "than",  "then",
      "which",   "who",   "whom",      "what",    "when",    "where",   "their",     "them",   "they",  "there",
      "these",   "those", "other",     "some",    "more",    "most",    "each",      "very",   "being", "been",
      "our",     "your",  "his",       "her",     "him",     "she",     "you",       "about",  "over",  "under",
      "like",    "see",   "compare",   "same",    "noun",    "verb",    "adjective", "adverb", "etc",   "e.g",
      "i.e",     "via",   "both",      "between", "through", "without", "within",    "upon",   "only",  "often",
      "usually", "esp",   "especially"};
  return kWords;
}

std::string Lower(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower;
}

bool IsWordChar(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// The alphabetic words of a text, lower case, in order.
std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && !IsWordChar(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && IsWordChar(text[i])) ++i;
    if (i > start) words.push_back(Lower(text.substr(start, i - start)));
  }
  return words;
}

std::vector<std::string> Lines(std::string_view text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    std::string_view line = text.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos) lines.emplace_back(line.substr(first));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return lines;
}

// True when a link's anchor may stand for the answer as an alias: one word that is short ("He"
// for helium, "ADT") or shares no 4-letter prefix with it. Longer anchors are often a more
// specific name ("Prolate spheroid" -> Prolate) or an inflection ("expected" -> Expect): accepting
// them would accept a different or near-miss answer.
bool IsAbbreviationOf(const std::string& anchor, const std::string& answer) {
  const std::string normal = NormalizeAnswer(anchor), answer_normal = NormalizeAnswer(answer);
  if (normal.empty() || normal.find(' ') != std::string::npos) return false;
  if (normal.size() <= 4) return true;
  return normal.compare(0, 4, answer_normal, 0, 4) != 0;
}

// The line without its web addresses ("http://example.org/x"): their words are no clue.
std::string WithoutUrls(std::string_view line) {
  std::string text;
  size_t i = 0;
  while (i < line.size()) {
    size_t found = std::min(line.find("http://", i), line.find("https://", i));
    if (found == std::string_view::npos) {
      text += line.substr(i);
      break;
    }
    text += line.substr(i, found - i);
    i = found;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i])) && line[i] != ')') ++i;
  }
  return text;
}

// WordNet's part-of-speech line, "noun (noun.animal)", "adjective (adj.all)": no clue in it.
bool IsPartOfSpeechLine(std::string_view line) {
  for (std::string_view pos : {"noun (", "verb (", "adjective (", "adverb ("}) {
    if (line.starts_with(pos) && line.size() < 40) return true;
  }
  return false;
}

// True when `phrase` (normalised) occurs as whole words in `text` (normalised).
bool ContainsPhrase(const std::string& normal_text, const std::string& phrase) {
  std::string normal_phrase = NormalizeAnswer(phrase);
  if (normal_phrase.empty()) return false;
  return (" " + normal_text + " ").find(" " + normal_phrase + " ") != std::string::npos;
}

// A chain under construction: documents and the relation of the link into each.
struct Walk {
  std::vector<DocIndex> docs;
  std::vector<int32_t> relations;  // relations[0] unused
};

// The clue material of one document: its definition line(s) and content words, rarest first.
struct Clue {
  std::string quote;               // a definition line with masked words cut out
  std::vector<std::string> words;  // content words of the text, rarest first (ties alphabetical)
};

class Synthesizer {
 public:
  Synthesizer(CorpusGraph& graph, OfflineSearchBackend& backend, const QaSynthOptions& options)
      : graph_(graph), toolbox_backend_(backend), options_(options) {}

  // Seeds in the order they are tried: rarest first, ties in a seeded order.
  std::vector<DocIndex> SeedOrder(int hops) const {
    std::vector<std::pair<std::pair<int32_t, uint64_t>, DocIndex>> keyed;
    for (DocIndex doc = 0; doc < static_cast<DocIndex>(graph_.size()); ++doc) {
      if (hops > 1 && graph_.out(doc).empty()) continue;
      keyed.push_back(
          {{graph_.inlinks(doc), DeriveSeed(options_.seed + static_cast<uint64_t>(hops), graph_.doc_id(doc))}, doc});
    }
    std::sort(keyed.begin(), keyed.end());
    std::vector<DocIndex> seeds;
    for (const auto& entry : keyed) seeds.push_back(entry.second);
    return seeds;
  }

  // One question from `seed` with `hops` documents, or nullopt when this walk yields none.
  Result<std::optional<SynthQuestion>> Attempt(DocIndex seed, int hops, uint64_t stream) {
    Rng rng(
        DeriveSeed(options_.seed ^ (stream * 0x9e3779b97f4a7c15ULL), graph_.doc_id(seed) + "#" + std::to_string(hops)));
    std::optional<Walk> walk = WalkFrom(seed, hops, rng);
    if (!walk) return std::optional<SynthQuestion>();
    return Phrase(*walk);
  }

 private:
  std::optional<Walk> WalkFrom(DocIndex seed, int hops, Rng& rng) const {
    Walk walk;
    walk.docs.push_back(seed);
    walk.relations.push_back(0);
    while (static_cast<int>(walk.docs.size()) < hops) {
      std::vector<std::pair<int32_t, size_t>> options;  // (inlinks, edge index)
      const auto& edges = graph_.out(walk.docs.back());
      std::set<DocIndex> offered;
      for (size_t e = 0; e < edges.size(); ++e) {
        DocIndex to = edges[e].to;
        if (std::find(walk.docs.begin(), walk.docs.end(), to) != walk.docs.end() || !offered.insert(to).second)
          continue;
        options.push_back({graph_.inlinks(to), e});
      }
      if (options.empty()) return std::nullopt;
      std::sort(options.begin(), options.end());
      size_t breadth = std::min(options.size(), static_cast<size_t>(options_.breadth));
      const auto& edge = edges[options[rng.Below(breadth)].second];
      walk.docs.push_back(edge.to);
      walk.relations.push_back(edge.relation);
    }
    return walk;
  }

  // Lower-case words no clue may show: every word of the chain's titles and the answer's aliases.
  static bool Masked(const std::string& word, const std::set<std::string>& masked) {
    for (const std::string& m : masked) {
      if (word == m || (m.size() >= 3 && word.rfind(m, 0) == 0)) return true;
    }
    return false;
  }

  Result<Clue> ClueOf(DocIndex doc, const std::set<std::string>& masked) {
    ENVFORGE_ASSIGN_OR_RETURN(std::string text, graph_.Text(doc));
    Clue clue;
    std::vector<std::string> definition_lines, other_lines;
    for (const std::string& line : Lines(text)) {
      if (NormalizeAnswer(line) == NormalizeAnswer(graph_.title(doc))) continue;
      std::string relation = RelationOf(line);
      if (!relation.empty() && graph_.IsRelation(relation)) continue;  // "hypernym: canine"
      if (IsPartOfSpeechLine(line)) continue;                          // WordNet's "noun (noun.animal)"
      std::string prose = WithoutUrls(line);
      (Words(prose).size() >= 4 ? definition_lines : other_lines).push_back(std::move(prose));
    }
    const auto& lines = definition_lines.empty() ? other_lines : definition_lines;
    std::set<std::string> seen;
    std::vector<std::pair<int64_t, std::string>> ranked;
    for (const std::string& line : lines) {
      for (const std::string& word : Words(line)) {
        if (word.size() < 4 || StopWords().count(word) || Masked(word, masked) || !seen.insert(word).second) continue;
        ENVFORGE_ASSIGN_OR_RETURN(int64_t frequency, graph_.DocumentFrequency(word));
        if (frequency > 0) ranked.push_back({frequency, word});
      }
    }
    std::sort(ranked.begin(), ranked.end());
    for (auto& entry : ranked) clue.words.push_back(std::move(entry.second));
    if (!lines.empty()) clue.quote = QuoteOf(lines.front(), masked);
    return clue;
  }

  // A definition line with masked words replaced by "…", at most 24 words.
  static std::string QuoteOf(const std::string& line, const std::set<std::string>& masked) {
    std::string quote;
    size_t i = 0, words = 0;
    bool last_masked = false;
    while (i < line.size() && words < 24) {
      if (!IsWordChar(line[i])) {
        char c = line[i++];
        if (c == '"') c = '\'';
        if (c == '\n' || c == '\t') c = ' ';
        if (!(c == ' ' && !quote.empty() && quote.back() == ' ')) quote += c;
        continue;
      }
      size_t start = i;
      while (i < line.size() && IsWordChar(line[i])) ++i;
      ++words;
      std::string word = line.substr(start, i - start);
      if (Masked(Lower(word), masked)) {
        if (!last_masked) quote += "…";
        last_masked = true;
      } else {
        quote += word;
        last_masked = false;
      }
    }
    size_t end = quote.find_last_not_of(" ,;:");
    return end == std::string::npos ? "" : quote.substr(0, end + 1) + (words >= 24 ? " …" : "");
  }

  // The candidates of the chain's last step (qa_synth.h, UNIQUENESS); `considered` adds up the
  // candidates of every step.
  Result<std::vector<DocIndex>> Resolve(const Walk& walk, const std::vector<std::vector<std::string>>& words,
                                        int64_t* considered) {
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<DocIndex> candidates, graph_.MatchAll(words[0], kMaxCandidates + 1));
    // Too many to follow: reported as such (the answer never among them), never truncated, since
    // a truncated set could look unique.
    if (candidates.size() > kMaxCandidates) return std::vector<DocIndex>{};
    *considered += static_cast<int64_t>(candidates.size());
    for (size_t step = 1; step < walk.docs.size(); ++step) {
      std::set<DocIndex> next;
      for (DocIndex doc : candidates) {
        for (const auto& edge : graph_.out(doc)) {
          if (edge.relation == walk.relations[step]) next.insert(edge.to);
        }
      }
      if (!words[step].empty()) {
        ENVFORGE_ASSIGN_OR_RETURN(std::vector<DocIndex> matching, graph_.MatchAll(words[step], kMaxCandidates + 1));
        if (matching.size() > kMaxCandidates) return std::vector<DocIndex>{};
        std::set<DocIndex> filtered;
        for (DocIndex doc : matching) {
          if (next.count(doc)) filtered.insert(doc);
        }
        next = std::move(filtered);
      }
      candidates.assign(next.begin(), next.end());
      *considered += static_cast<int64_t>(candidates.size());
    }
    return candidates;
  }

  bool AllSameAnswer(const std::vector<DocIndex>& candidates, DocIndex answer) const {
    if (std::find(candidates.begin(), candidates.end(), answer) == candidates.end()) return false;
    const std::string normal = NormalizeAnswer(AnswerFromTitle(graph_.title(answer)));
    return std::all_of(candidates.begin(), candidates.end(),
                       [&](DocIndex doc) { return NormalizeAnswer(AnswerFromTitle(graph_.title(doc))) == normal; });
  }

  // The question of a walk (nullopt when it cannot be made unique, leaks a title, or its solution
  // path does not find the answer).
  Result<std::optional<SynthQuestion>> Phrase(const Walk& walk) {
    const std::optional<SynthQuestion> none;
    const DocIndex answer_doc = walk.docs.back();
    const int hops = static_cast<int>(walk.docs.size());
    SynthQuestion question;
    question.hops = hops;
    question.key.answer = AnswerFromTitle(graph_.title(answer_doc));
    if (NormalizeAnswer(question.key.answer).empty() || question.key.answer.size() > kMaxNameBytes) return none;
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<std::string> anchors, graph_.AnchorNames(answer_doc));
    const std::set<std::string> masked = MaskedWords(walk, anchors);
    ENVFORGE_ASSIGN_OR_RETURN(Clue seed_clue, ClueOf(walk.docs.front(), masked));
    if (seed_clue.words.empty()) return none;
    Clue answer_clue;
    if (hops > 1) {
      ENVFORGE_ASSIGN_OR_RETURN(answer_clue, ClueOf(answer_doc, masked));
    }
    ENVFORGE_ASSIGN_OR_RETURN(std::optional<StepWords> words,
                              UniqueClueWords(walk, seed_clue, answer_clue, &question.candidates));
    if (!words) return none;

    std::vector<std::string> aliases = AliasCandidates(answer_doc, anchors, question.key.answer);
    ENVFORGE_ASSIGN_OR_RETURN(question.distractors,
                              Distractors(walk, words->front().front(), question.key.answer, aliases));
    question.key.aliases = DistinctAliases(aliases, question.key.answer);
    for (size_t step = 0; step < walk.docs.size(); ++step) {
      question.chain.push_back({graph_.doc_id(walk.docs[step]), graph_.title(walk.docs[step]),
                                graph_.relation(walk.relations[step]), (*words)[step]});
    }
    question.prompt = PromptOf(question, seed_clue.quote);
    if (LeaksAName(question)) return none;
    question.rarity = graph_.inlinks(walk.docs.front());
    question.answer_inlinks = graph_.inlinks(answer_doc);
    question.difficulty = std::min(5, hops + (options_.obfuscation >= 2 ? 1 : 0));
    question.source = graph_.source(answer_doc);
    ENVFORGE_ASSIGN_OR_RETURN(std::optional<SolutionPath> path,
                              FindingSolutionPath(walk, words->front(), question.key));
    if (!path) return none;
    question.solution = std::move(*path);
    return std::optional<SynthQuestion>(std::move(question));
  }

  // Words no clue may show: every word of the chain's titles and of the answer's other names.
  std::set<std::string> MaskedWords(const Walk& walk, const std::vector<std::string>& anchors) const {
    std::set<std::string> masked;
    for (DocIndex doc : walk.docs) {
      for (const std::string& word : Words(graph_.title(doc))) masked.insert(word);
    }
    for (const std::string& name : anchors) {
      for (const std::string& word : Words(name)) masked.insert(word);
    }
    return masked;
  }

  // Clue words per step (qa_synth.h, UNIQUENESS): the seed's by obfuscation, then words of the
  // answer, then more of the seed's, until the chain resolves to the answer alone. nullopt when
  // it never does. `considered` gets the candidates of the final check.
  using StepWords = std::vector<std::vector<std::string>>;
  Result<std::optional<StepWords>> UniqueClueWords(const Walk& walk, const Clue& seed_clue, const Clue& answer_clue,
                                                   int64_t* considered) {
    const size_t hops = walk.docs.size();
    StepWords words(hops);
    const size_t wanted = options_.obfuscation == 0 ? 6 : options_.obfuscation == 1 ? kKeywordClueWords : 2;
    const size_t seed_words = std::min(wanted, seed_clue.words.size());
    if (options_.obfuscation == 0) {
      // A quote: its words, rarest first, are what a search for it matches.
      std::set<std::string> quoted;
      for (const std::string& word : Words(seed_clue.quote)) quoted.insert(word);
      for (const std::string& word : seed_clue.words) {
        if (quoted.count(word) && words[0].size() < seed_words) words[0].push_back(word);
      }
      if (words[0].empty()) return std::optional<StepWords>();
    } else {
      words[0].assign(seed_clue.words.begin(), seed_clue.words.begin() + static_cast<std::ptrdiff_t>(seed_words));
    }
    size_t answer_words = 0;
    for (;;) {
      *considered = 0;
      ENVFORGE_ASSIGN_OR_RETURN(std::vector<DocIndex> candidates, Resolve(walk, words, considered));
      if (AllSameAnswer(candidates, walk.docs.back())) return std::optional<StepWords>(std::move(words));
      if (hops > 1 && answer_words < std::min<size_t>(kMaxAnswerClueWords, answer_clue.words.size())) {
        words.back().push_back(answer_clue.words[answer_words++]);
      } else if (options_.obfuscation != 0 && words[0].size() < std::min(seed_words + 3, seed_clue.words.size())) {
        words[0].push_back(seed_clue.words[words[0].size()]);
      } else {
        return std::optional<StepWords>();
      }
    }
  }

  // The title's other parts and the anchors that look like another name of the answer.
  std::vector<std::string> AliasCandidates(DocIndex answer_doc, const std::vector<std::string>& anchors,
                                           const std::string& answer) const {
    std::vector<std::string> aliases = AliasesFromTitle(graph_.title(answer_doc));
    for (const std::string& name : anchors) {
      if (IsAbbreviationOf(name, answer)) aliases.push_back(name);
    }
    return aliases;
  }

  static std::vector<std::string> DistinctAliases(const std::vector<std::string>& aliases, const std::string& answer) {
    std::set<std::string> normals = {NormalizeAnswer(answer)};
    std::vector<std::string> distinct;
    for (const std::string& alias : aliases) {
      if (alias.size() <= kMaxNameBytes && normals.insert(NormalizeAnswer(alias)).second &&
          !NormalizeAnswer(alias).empty()) {
        distinct.push_back(alias);
      }
    }
    return distinct;
  }

  // What a looser reading of the question (the seed's rarest clue word alone, no clue on the
  // answer) also reaches: answers that are not the answer or one of its names.
  Result<std::vector<std::string>> Distractors(const Walk& walk, const std::string& rarest_word,
                                               const std::string& answer, const std::vector<std::string>& aliases) {
    StepWords relaxed(walk.docs.size());
    relaxed[0] = {rarest_word};
    int64_t ignored = 0;
    ENVFORGE_ASSIGN_OR_RETURN(std::vector<DocIndex> loose, Resolve(walk, relaxed, &ignored));
    std::set<std::string> taken = {NormalizeAnswer(answer)};
    for (const std::string& alias : aliases) taken.insert(NormalizeAnswer(alias));
    std::vector<std::string> distractors;
    for (DocIndex doc : loose) {
      std::string distractor = AnswerFromTitle(graph_.title(doc));
      std::string normal = NormalizeAnswer(distractor);
      if (normal.empty() || distractor.size() > kMaxNameBytes || !taken.insert(normal).second) continue;
      distractors.push_back(std::move(distractor));
      if (static_cast<int>(distractors.size()) == kMaxDistractors) break;
    }
    return distractors;
  }

  static bool LeaksAName(const SynthQuestion& question) { return PromptNamesTheChain(question, question.prompt); }

  // The solution path (a search for the seed's clue words, then the chain's opens), kept only when
  // its replay through the session's tool code finds an answer the key accepts; a wider search
  // page (kSearchMaxTopK) when the first page does not show the seed.
  Result<std::optional<SolutionPath>> FindingSolutionPath(const Walk& walk, const std::vector<std::string>& seed_words,
                                                          const AnswerKey& key) {
    std::string query;
    for (const std::string& word : seed_words) query += (query.empty() ? "" : " ") + word;
    for (int top_k : {kSolutionTopK, toolsets::kSearchMaxTopK}) {
      SolutionPath path;
      path.calls.push_back({"", std::string(toolsets::kSearchTool), {{"query", query}, {"top_k", top_k}}});
      for (DocIndex doc : walk.docs) {
        path.calls.push_back({"", std::string(toolsets::kOpenTool), {{"doc_id_or_url", graph_.doc_id(doc)}}});
      }
      for (size_t i = 0; i < path.calls.size(); ++i) path.calls[i].id = "step-" + std::to_string(i + 1);
      SearchToolbox toolbox(std::make_unique<BorrowedBackend>(toolbox_backend_));
      auto replay = ReplaySolutionPath(path, [&](const toolsets::ToolCall& call) { return toolbox.Call(call); });
      if (replay.ok() && MatchAnswer(replay->answer, key).passed) return std::optional<SolutionPath>(std::move(path));
      if (!replay.ok() && replay.status().code() != StatusCode::kFailedPrecondition) return replay.status();
    }
    return std::optional<SolutionPath>();
  }

  std::string PromptOf(const SynthQuestion& question, const std::string& quote) const {
    auto listed = [](const std::vector<std::string>& words) {
      std::string text;
      for (size_t i = 0; i < words.size(); ++i) {
        text += (i == 0 ? "" : i + 1 == words.size() ? " and " : ", ") + ("\"" + words[i] + "\"");
      }
      return text;
    };
    static const char* kOrdinals[] = {"first", "second", "third", "fourth", "fifth"};
    std::string seed_clue = options_.obfuscation == 0 ? "whose text reads, in part: \"" + quote + "\""
                                                      : "whose text mentions " + listed(question.chain[0].clue_words);
    const int hops = question.hops;
    if (hops == 1) {
      return "Which entry of the reference corpus is described here: the entry " + seed_clue +
             "? Answer with the entry's headword (its title) alone.";
    }
    std::string prompt = "Start from the entry of the reference corpus " + seed_clue + ".";
    for (int step = 1; step < hops; ++step) {
      const std::string& relation = question.chain[static_cast<size_t>(step)].relation;
      std::string link = relation.empty() ? "one of its cross-references" : "its \"" + relation + "\" link";
      prompt += std::string(step == 1 ? " Follow " : " From that entry, follow ") + link + " to a " + kOrdinals[step] +
                " entry.";
    }
    if (!question.chain.back().clue_words.empty()) {
      prompt += " The " + std::string(kOrdinals[hops - 1]) + " entry's text mentions " +
                listed(question.chain.back().clue_words) + ".";
    }
    prompt += " What is the headword (title) of the " + std::string(kOrdinals[hops - 1]) +
              " entry? Answer with the headword alone.";
    return prompt;
  }

  // The toolbox owns its backend; the synthesizer lends it the one it keeps open.
  class BorrowedBackend : public SearchBackend {
   public:
    explicit BorrowedBackend(SearchBackend& backend) : backend_(backend) {}
    Result<SearchPage> Search(const SearchQuery& query) override { return backend_.Search(query); }
    Result<Document> Open(std::string_view doc_id_or_url) override { return backend_.Open(doc_id_or_url); }
    std::string name() const override { return backend_.name(); }

   private:
    SearchBackend& backend_;
  };

  CorpusGraph& graph_;
  OfflineSearchBackend& toolbox_backend_;
  const QaSynthOptions& options_;
};

Status CheckOptions(const QaSynthOptions& options) {
  if (options.questions < 1) return InvalidArgumentError("search synth: --questions must be at least 1");
  if (options.min_hops < 1 || options.max_hops > kMaxSynthHops || options.min_hops > options.max_hops) {
    return InvalidArgumentError("search synth: hops must be a range within 1.." + std::to_string(kMaxSynthHops) +
                                ", got " + std::to_string(options.min_hops) + ".." + std::to_string(options.max_hops));
  }
  if (options.breadth < 1 || options.breadth > kMaxSynthBreadth) {
    return InvalidArgumentError("search synth: --breadth must be 1.." + std::to_string(kMaxSynthBreadth));
  }
  if (options.obfuscation < 0 || options.obfuscation > 2) {
    return InvalidArgumentError("search synth: obfuscation must be 0 (quote), 1 (keywords) or 2 (sparse)");
  }
  return Status::Ok();
}

std::string PaddedNumber(int n) {
  std::string digits = std::to_string(n);
  return std::string(digits.size() < 4 ? 4 - digits.size() : 0, '0') + digits;
}

}  // namespace

Json SynthQuestion::Knobs(const QaSynthOptions& options) const {
  Json relations = Json::array();
  for (size_t step = 1; step < chain.size(); ++step)
    relations.push_back(chain[step].relation.empty() ? "cross-reference" : chain[step].relation);
  int64_t clue_words = 0;
  for (const ChainStep& step : chain) clue_words += static_cast<int64_t>(step.clue_words.size());
  Json knobs = {{"hops", hops},
                {"breadth", options.breadth},
                {"rarity", rarity},
                {"answer_inlinks", answer_inlinks},
                {"obfuscation", ObfuscationName(options.obfuscation)},
                {"relations", std::move(relations)},
                {"clue_words", clue_words},
                {"candidates", candidates},
                {"distractors", distractors},
                {"source", source},
                {"seed", options.seed}};
  for (const auto& [name, value] : extra_knobs.items()) knobs[name] = value;
  return knobs;
}

bool PromptNamesTheChain(const SynthQuestion& question, const std::string& prompt) {
  const std::string normal_prompt = NormalizeAnswer(prompt);
  std::vector<std::string> names = {question.key.answer};
  names.insert(names.end(), question.key.aliases.begin(), question.key.aliases.end());
  for (const ChainStep& step : question.chain) {
    names.push_back(AnswerFromTitle(step.title));
    for (const std::string& part : AliasesFromTitle(step.title)) names.push_back(part);
  }
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& name) { return ContainsPhrase(normal_prompt, name); });
}

std::string ObfuscationName(int level) {
  switch (level) {
    case 0: return "quote";
    case 1: return "keywords";
    default: return "sparse";
  }
}

Result<int> ObfuscationLevel(const std::string& name) {
  for (int level = 0; level <= 2; ++level) {
    if (name == ObfuscationName(level) || name == std::to_string(level)) return level;
  }
  return InvalidArgumentError("search synth: --obfuscation must be quote, keywords or sparse (0, 1, 2), got '" + name +
                              "'");
}

Result<QaSynthResult> SynthesizeQuestions(const std::string& corpus_path, const QaSynthOptions& options,
                                          const std::function<void(const QaSynthProgress&)>& on_progress) {
  ENVFORGE_RETURN_IF_ERROR(CheckOptions(options));
  const auto start = Clock::now();
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<CorpusGraph> graph, CorpusGraph::Load(corpus_path));
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<OfflineSearchBackend> backend,
                            OfflineSearchBackend::OpenCorpus(corpus_path));
  QaSynthResult result;
  result.stats.documents = static_cast<int64_t>(graph->size());
  result.stats.links = graph->links();
  result.stats.load_seconds = SecondsSince(start);
  if (graph->size() == 0)
    return FailedPreconditionError("search synth: the corpus " + corpus_path + " holds no document");
  Synthesizer synthesizer(*graph, *backend, options);
  const int64_t max_attempts =
      options.max_attempts > 0 ? options.max_attempts : std::max<int64_t>(2000, int64_t{200} * options.questions);
  for (int hops = options.min_hops; hops <= options.max_hops; ++hops) {
    const auto hop_start = Clock::now();
    std::vector<DocIndex> seeds = synthesizer.SeedOrder(hops);
    std::set<std::string> prompts;
    QaSynthProgress progress{hops, 0, options.questions, 0, 0};
    int made_this_cycle = 0;
    for (int64_t attempt = 0; progress.made < options.questions && attempt < max_attempts && !seeds.empty();
         ++attempt) {
      const size_t position = static_cast<size_t>(attempt) % seeds.size();
      if (position == 0 && attempt > 0) {
        if (made_this_cycle == 0) break;  // a whole pass over the seeds made nothing new
        made_this_cycle = 0;
      }
      progress.attempts = attempt + 1;
      ENVFORGE_ASSIGN_OR_RETURN(
          std::optional<SynthQuestion> question,
          synthesizer.Attempt(seeds[position], hops, static_cast<uint64_t>(attempt) / seeds.size()));
      if (question && prompts.insert(question->prompt).second) {
        question->id = "h" + std::to_string(hops) + "-" + PaddedNumber(progress.made + 1);
        result.questions.push_back(std::move(*question));
        ++progress.made;
        ++made_this_cycle;
        progress.seconds = SecondsSince(start);
        if (on_progress) on_progress(progress);
      } else if (on_progress && progress.attempts % 100 == 0) {
        progress.seconds = SecondsSince(start);
        on_progress(progress);
      }
    }
    result.stats.questions_by_hops[hops] = progress.made;
    result.stats.attempts_by_hops[hops] = progress.attempts;
    result.stats.seconds_by_hops[hops] = SecondsSince(hop_start);
    if (progress.made < options.questions) {
      return FailedPreconditionError(
          "search synth: the corpus " + corpus_path + " yields only " + std::to_string(progress.made) + " of " +
          std::to_string(options.questions) + " questions with " + std::to_string(hops) + " hop(s) (" +
          std::to_string(graph->size()) + " documents, " + std::to_string(graph->links()) + " links, " +
          std::to_string(progress.attempts) + " walks tried): ask for fewer questions or hops, or use a larger corpus");
    }
  }
  result.stats.seconds = SecondsSince(start);
  return result;
}

}  // namespace envforge::search
