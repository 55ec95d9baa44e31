// The audit of search tasks (search_probes.h).
#include "verifiers/search_probes.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include "sandbox/search_bundle.h"
#include "toolsets/search/offline_backend.h"
#include "toolsets/search/search_toolbox.h"

namespace envforge::verifiers {
namespace {

namespace fs = std::filesystem;

bool Named(const search::AnswerKey& key, const std::string& text) { return search::MatchAnswer(text, key).passed; }

bool IsDistractor(const SearchTaskFacts& facts, const std::string& text) {
  const std::string normal = search::NormalizeAnswer(text);
  return !normal.empty() && std::any_of(facts.distractors.begin(), facts.distractors.end(),
                                        [&](const std::string& d) { return search::NormalizeAnswer(d) == normal; });
}

std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

std::string Join(const std::vector<std::string>& words, size_t skip = SIZE_MAX) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i != skip) text += (text.empty() ? "" : " ") + words[i];
  }
  return text;
}

// Forms the key names by construction (normalisation folds them together).
std::vector<std::string> EquivalentForms(const std::string& form) {
  std::string upper = form, lower = form;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return {form,
          " " + form + " ",
          upper,
          lower,
          "The " + form,
          form + ".",
          "\"" + form + "\"",
          "  " + Join(SplitWords(form)) + "\t"};
}

// One edit away: a letter dropped, doubled or appended, a plural, a word dropped or added.
std::vector<std::string> NearMisses(const std::string& form) {
  std::vector<std::string> misses;
  if (form.size() > 1) {
    misses.push_back(form.substr(0, form.size() - 1));
    misses.push_back(form.substr(1));
  }
  if (!form.empty() && std::isalnum(static_cast<unsigned char>(form.back()))) misses.push_back(form + form.back());
  misses.push_back(form + "s");
  misses.push_back(form + "x");
  misses.push_back(form + " gas");
  misses.push_back("not " + form);
  std::vector<std::string> words = SplitWords(form);
  if (words.size() > 1) {
    for (size_t i = 0; i < words.size(); ++i) misses.push_back(Join(words, i));
  }
  return misses;
}

// Replays the task's solution path through a toolbox over `backend`: "" when it reaches an answer
// the key names.
std::string ReplayProblem(search::SearchBackend& backend, const search::SolutionPath& path,
                          const search::AnswerKey& key) {
  class Borrowed : public search::SearchBackend {
   public:
    explicit Borrowed(search::SearchBackend& backend) : backend_(backend) {}
    Result<search::SearchPage> Search(const search::SearchQuery& query) override { return backend_.Search(query); }
    Result<search::Document> Open(std::string_view id) override { return backend_.Open(id); }
    std::string name() const override { return backend_.name(); }

   private:
    search::SearchBackend& backend_;
  };
  search::SearchToolbox toolbox(std::make_unique<Borrowed>(backend));
  auto replay = search::ReplaySolutionPath(path, [&](const toolsets::ToolCall& call) { return toolbox.Call(call); });
  if (!replay.ok()) return replay.status().message();
  if (!Named(key, replay->answer)) {
    return "the solution path reaches '" + replay->final_title + "' (" + replay->final_doc_id +
           "), whose answer the answer key rejects";
  }
  return "";
}

}  // namespace

Result<std::map<std::string, SearchTaskFacts>> LoadSearchTaskFacts(const sandbox::EnvBundle& bundle) {
  ENVFORGE_ASSIGN_OR_RETURN(sandbox::SearchBundle search, sandbox::LoadSearchBundle(bundle.path));
  std::map<std::string, SearchTaskFacts> facts;
  for (const sandbox::TaskRecord& task : bundle.tasks) {
    SearchTaskFacts& entry = facts[task.id];
    if (auto key = search.answers.find(task.id); key != search.answers.end()) entry.key = key->second;
    entry.prompt = task.prompt;
    if (auto distractors = task.knobs.find("distractors"); distractors != task.knobs.end() && distractors->is_array()) {
      for (const Json& item : *distractors) {
        if (item.is_string()) entry.distractors.push_back(item.get<std::string>());
      }
    }
  }
  for (auto& [id, entry] : facts) {
    for (const auto& [other_id, other] : facts) {
      if (other_id != id && !Named(entry.key, other.key.answer)) entry.other_answers.push_back(other.key.answer);
    }
  }
  if (search.solutions.empty()) return facts;
  // The corpus, once, for every task's replay.
  const std::string corpus =
      (fs::temp_directory_path() / ("envforge-audit-corpus-" + std::to_string(::getpid()) + ".sqlite")).string();
  ENVFORGE_RETURN_IF_ERROR(sandbox::ExtractSearchCorpus(bundle.path, corpus));
  auto backend = search::OfflineSearchBackend::OpenCorpus(corpus);
  std::error_code ec;
  if (!backend.ok()) {
    fs::remove(corpus, ec);
    return backend.status();
  }
  for (const auto& [id, path] : search.solutions) {
    auto it = facts.find(id);
    if (it == facts.end()) continue;
    it->second.has_solution = true;
    it->second.solution_problem = ReplayProblem(**backend, path, it->second.key);
  }
  backend->reset();
  fs::remove(corpus, ec);
  return facts;
}

Verdict KeyVerdict(const SearchTaskFacts& facts, const std::string& text) {
  Verdict verdict;
  if (IsDistractor(facts, text)) {
    verdict.reasons.push_back("a distractor: the task's clue chain rules it out");
  } else if (!Named(facts.key, text)) {
    verdict.reasons.push_back("the answer key names no such answer");
  } else {
    verdict.passed = true;
    verdict.score = 1;
  }
  return verdict;
}

void AddSearchProbes(const SearchTaskFacts& facts, ProbeSet& out) {
  auto add = [&](const std::string& text, const char* kind, const std::string& label) {
    if (text.empty() || text.size() > search::kMaxAnswerBytes) return;
    // As a JSON string: the answer schema is a string, and "10" unquoted would read as a number.
    out.Add(Probe{DumpJson(Json(text)), ProbeFamily::kMutant, kind, label, {}});
  };
  std::vector<std::string> forms = {facts.key.answer};
  forms.insert(forms.end(), facts.key.aliases.begin(), facts.key.aliases.end());
  for (const std::string& form : forms) {
    for (const std::string& text : EquivalentForms(form)) {
      if (Named(facts.key, text)) add(text, "search.equivalent", "of \"" + form + "\"");
    }
    for (const std::string& text : NearMisses(form)) {
      if (!Named(facts.key, text)) add(text, "search.near_miss", "of \"" + form + "\"");
    }
  }
  for (const std::string& distractor : facts.distractors) add(distractor, "search.distractor", "");
  for (const std::string& other : facts.other_answers) add(other, "search.other_answer", "");
  std::vector<std::string> words = SplitWords(facts.prompt);
  for (size_t i = 0; i < words.size(); ++i) {
    for (size_t n = 1; n <= 2 && i + n <= words.size(); ++n) {
      std::string phrase = Join(std::vector<std::string>(words.begin() + static_cast<std::ptrdiff_t>(i),
                                                         words.begin() + static_cast<std::ptrdiff_t>(i + n)));
      if (!search::NormalizeAnswer(phrase).empty() && !Named(facts.key, phrase)) add(phrase, "search.prompt", "");
    }
  }
}

std::vector<Finding> SearchKeyFindings(const SearchTaskFacts& facts) {
  std::vector<Finding> findings;
  const std::string prompt = " " + search::NormalizeAnswer(facts.prompt) + " ";
  std::vector<std::string> forms = {facts.key.answer};
  forms.insert(forms.end(), facts.key.aliases.begin(), facts.key.aliases.end());
  for (const std::string& form : forms) {
    const std::string normal = search::NormalizeAnswer(form);
    if (!normal.empty() && prompt.find(" " + normal + " ") != std::string::npos) {
      findings.push_back({"answer_in_prompt", form, "search.key", "the prompt contains an answer the key accepts"});
    }
  }
  if (facts.has_solution && !facts.solution_problem.empty()) {
    findings.push_back({"solution_path_failed", "", "search.solution_path", facts.solution_problem});
  }
  return findings;
}

}  // namespace envforge::verifiers
