// Offline synthesis of multi-hop search questions over a corpus (issue 15; real-envs.md 4.4:
// "generate offline QA by walking the local corpus"), in the spirit of BrowseComp's inverted
// questions and DeepSeek-V3.2's search-agent data: start from a long-tail entity, walk the
// corpus's links, phrase a question from clues along the chain, keep it only when the clue chain
// resolves to one document and the recorded solution path finds it.
//
// A question with H hops is a chain of H documents d1 -> d2 -> ... -> dH joined by H-1 links:
//   * d1, the SEED, is a long-tail entity: seeds are tried in order of how few documents link to
//     it (its rarity), ties in a seeded order. The seed is described by a CLUE: words of its own
//     definition, never its title (see obfuscation).
//   * each next document is one of the `breadth` rarest link targets of the previous one (seeded
//     choice), named in the question by the link's RELATION only ("its hypernym"; a plain cross
//     reference when the link has no relation name), never by its title.
//   * the ANSWER is dH's title as AnswerFromTitle reads it; aliases are the title's other parts
//     (WordNet synonyms) and the one-word anchors other documents link to dH with that look like
//     another name, not an inflection ("He" for helium, "ADT"; never "expected" for Expect).
// H = 1 is a definition question: which entry does the clue describe?
//
// UNIQUENESS, checked by search over the corpus's FTS5 index: the candidates of step 1 are every
// document matching all clue words; those of step k+1 every link target, with the step's relation,
// of a candidate of step k (and matching the step's clue words, if the step has any). The question
// is kept only when the last step's candidates are exactly {dH}. When they are not, clue words of
// dH are added (rarest first, at most kMaxAnswerClueWords), then more words of d1; a chain still
// ambiguous is dropped. The eliminated candidates' answers are the DISTRACTORS (knobs).
//
// OBFUSCATION, per clue (and a knob): 0 "quote" quotes a definition line with the chain's titles
// and aliases cut out ("…"); 1 "keywords" (default) lists kKeywordClueWords content words of it,
// rarest in the corpus first; 2 "sparse" lists the fewest rare words that still make the question
// unique (starting from 2). No prompt ever contains the answer, an alias, or a chain document's
// title as a phrase (checked on the normalised text; such a question is dropped).
//
// SOLUTION PATH (solution_path.h): search(the seed's clue words, top_k kSolutionTopK), open(d1),
// open(d2), ..., open(dH); every question is replayed through a SearchToolbox over the offline
// backend (the session's own tool code) before it is kept, and its answer must pass MatchAnswer.
//
// Determinism: the same corpus, options and seed give the same questions, byte for byte.
// Thread safety: SynthesizeQuestions keeps no global state and opens the corpus read-only, so
// calls may run concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "toolsets/search/answer_match.h"
#include "toolsets/search/solution_path.h"

namespace envforge::search {

inline constexpr int kMaxSynthHops = 4;
inline constexpr int kMaxSynthBreadth = 50;
inline constexpr int kKeywordClueWords = 3;
inline constexpr int kMaxAnswerClueWords = 3;
inline constexpr int kSolutionTopK = 10;
inline constexpr int kMaxDistractors = 8;

struct QaSynthOptions {
  int questions = 10;  // per hop count, >= 1
  int min_hops = 1;    // 1..kMaxSynthHops, min_hops <= max_hops
  int max_hops = 1;
  int breadth = 3;      // link targets considered at each step of the walk, 1..kMaxSynthBreadth
  int obfuscation = 1;  // 0 quote, 1 keywords, 2 sparse
  uint64_t seed = 1;
  // Seeds tried per hop count before giving up; 0: 200 per question asked (at least 2,000).
  int64_t max_attempts = 0;
};

// One step of a question's chain.
struct ChainStep {
  std::string doc_id;
  std::string title;
  std::string relation;                 // the link from the previous step ("" for the seed and for
                                        // a plain cross reference)
  std::vector<std::string> clue_words;  // words of this document's text the question cites (may be empty)
};

struct SynthQuestion {
  std::string id;  // "h<hops>-<n>", n from 1, zero-padded to 4 digits
  std::string prompt;
  AnswerKey key;
  int hops = 0;
  int difficulty = 1;  // 1..5
  std::vector<ChainStep> chain;
  std::vector<std::string> distractors;  // answers of eliminated candidates (never normalise equal to the key)
  int64_t candidates = 0;                // documents the uniqueness check considered, all steps
  int64_t rarity = 0;                    // documents linking to the seed
  int64_t answer_inlinks = 0;            // documents linking to the answer
  std::string source;                    // the answer document's source ("wordnet", "gcide", ...)
  SolutionPath solution;
  // Knobs a later stage adds (envsynth/search_agents.h: the writer, the answer agents' record);
  // they never name the answer or a title either.
  Json extra_knobs = Json::object();
  // The task's knobs: {"hops", "breadth", "rarity", "answer_inlinks", "obfuscation", "relations",
  // "clue_words", "candidates", "distractors", "source", "seed"} and extra_knobs. Never the answer
  // or a title.
  Json Knobs(const QaSynthOptions& options) const;
};

struct QaSynthProgress {
  int hops = 0;
  int made = 0;  // questions kept for this hop count
  int wanted = 0;
  int64_t attempts = 0;  // seeds tried for this hop count
  double seconds = 0;    // since Synthesize started
};

struct QaSynthStats {
  std::map<int, int> questions_by_hops;
  std::map<int, int64_t> attempts_by_hops;
  std::map<int, double> seconds_by_hops;
  int64_t documents = 0;
  int64_t links = 0;
  double load_seconds = 0;  // reading titles and links
  double seconds = 0;       // everything
};

struct QaSynthResult {
  std::vector<SynthQuestion> questions;  // by hop count, then in the order made
  QaSynthStats stats;
};

// Synthesizes options.questions questions for each hop count in [min_hops, max_hops] from the
// corpus at `corpus_path`. on_progress (may be null) is called after every kept question and every
// 100 attempts. Errors: InvalidArgument naming the bad option; those of CorpusReader::Open
// (NotFound for a missing corpus, InvalidArgument for a file that is not one); FailedPrecondition
// when the corpus cannot yield enough questions of some hop count ("the corpus yields only K of N
// questions with H hops: ..."), so a caller never writes a partial set.
Result<QaSynthResult> SynthesizeQuestions(const std::string& corpus_path, const QaSynthOptions& options,
                                          const std::function<void(const QaSynthProgress&)>& on_progress = nullptr);

// True when `prompt` names the question's answer, one of its aliases or a document of its chain
// (its title or a part of it), as whole words of the normalised text: the check every synthesized
// prompt passes, the rewritten ones of envsynth/search_agents.h too.
bool PromptNamesTheChain(const SynthQuestion& question, const std::string& prompt);

// "quote", "keywords", "sparse"; ObfuscationLevel is the inverse (InvalidArgument otherwise; a
// digit 0..2 is accepted too).
std::string ObfuscationName(int level);
Result<int> ObfuscationLevel(const std::string& name);

}  // namespace envforge::search
