// The audit of search tasks (kind "search"): what the answer key says an answer is, the probes
// that test it, and the checks of the key itself.
//
// A search task's verifier is normalised exact match against its answer key
// (toolsets/search/answer_match.h): answers that normalise equal ("Pb ", "PB", "the Pb") are the
// SAME answer, by design. The general audit has no oracle for such a task and so reported every
// accepted case or spacing variant as an "accepted mutant"; here the answer key is the audit's
// ORACLE instead (KeyVerdict), computed in the audit's own process from the bundle's
// search/answers/<id>.json, with one piece of independent evidence on top: the task's
// DISTRACTORS (knobs "distractors", written by `envforge search synth`: answers the clue chain
// rules out) are wrong whatever the key says. So:
//   * a verifier that rejects a form the key names       -> false reject (broken)
//   * a verifier that accepts what the key does not name -> false accept (broken)
//   * a key that names a distractor (as answer or alias) -> its distractor probe is accepted by the
//     verifier and rejected by the oracle: false accept (broken) -- a key that accepts a wrong answer
//
// Probes (family mutant, so they are re-judged on the other lane for determinism):
//   search.equivalent   forms the key names: case, spacing, articles, punctuation, of the answer
//                       and of every alias (must pass)
//   search.near_miss    one edit away from the answer or an alias, changing its normal form: a
//                       letter dropped, doubled or appended, a trailing "s", a word dropped or
//                       added (must fail unless the key names it)
//   search.distractor   the task's distractors (must fail)
//   search.other_answer other tasks' answers the key does not name (must fail)
//   search.prompt       words and word pairs of the prompt the key does not name (must fail)
//
// Task-level checks (SearchKeyFindings): the answer or an alias written in the prompt
// ("answer_in_prompt": suspect, the question gives its answer away); a recorded solution path
// that does not replay on the bundle's corpus, or replays to an answer the key rejects
// ("solution_path_failed": broken).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sandbox/env_bundle.h"
#include "toolsets/search/answer_match.h"
#include "toolsets/search/solution_path.h"
#include "verifiers/audit.h"
#include "verifiers/probes.h"

namespace envforge::verifiers {

struct SearchTaskFacts {
  search::AnswerKey key;
  std::vector<std::string> distractors;    // knobs "distractors" (strings only)
  std::vector<std::string> other_answers;  // other tasks' answers
  std::string prompt;
  // The replay of the task's recorded solution path on the bundle's corpus: "" when it reached an
  // answer the key names (or the task has no path), else what went wrong.
  std::string solution_problem;
  bool has_solution = false;
};

// The facts of every task of a search bundle, by task id; the solution paths are replayed
// through a SearchToolbox over a temporary copy of the bundle's corpus (removed before
// returning). Errors: LoadSearchBundle's and ExtractSearchCorpus's.
Result<std::map<std::string, SearchTaskFacts>> LoadSearchTaskFacts(const sandbox::EnvBundle& bundle);

// The oracle's verdict on `text`: passes when the key names it and it is no distractor.
Verdict KeyVerdict(const SearchTaskFacts& facts, const std::string& text);

// Adds the probes of the file comment.
void AddSearchProbes(const SearchTaskFacts& facts, ProbeSet& out);

// The task-level findings of the file comment.
std::vector<Finding> SearchKeyFindings(const SearchTaskFacts& facts);

}  // namespace envforge::verifiers
