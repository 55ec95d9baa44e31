#include "toolsets/search/answer_judge.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace envforge::search {
namespace {

int Words(const std::string& normal) {
  if (normal.empty()) return 0;
  return 1 + static_cast<int>(std::count(normal.begin(), normal.end(), ' '));
}

int Letters(const std::string& normal) {
  return static_cast<int>(std::count_if(normal.begin(), normal.end(), [](unsigned char c) { return c != ' '; }));
}

// Whether `inner` occurs in `outer` as whole words (both normal forms).
bool HoldsWords(const std::string& outer, const std::string& inner) {
  return !inner.empty() && (" " + outer + " ").find(" " + inner + " ") != std::string::npos;
}

}  // namespace

bool IsNearMiss(std::string_view submitted, const AnswerKey& key) {
  if (submitted.size() > kMaxAnswerBytes) return false;
  const std::string normal = NormalizeAnswer(submitted);
  if (normal.empty() || Words(normal) > kMaxNearMissWords) return false;
  std::vector<std::string> names = {key.answer};
  names.insert(names.end(), key.aliases.begin(), key.aliases.end());
  return std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    const std::string normal_name = NormalizeAnswer(name);
    if (HoldsWords(normal, normal_name)) return true;
    return Letters(normal) >= kMinNearMissLetters && HoldsWords(normal_name, normal);
  });
}

Result<AnswerVerdict> JudgeAnswer(std::string_view submitted, const AnswerKey& key, std::string_view question,
                                  AnswerJudge* judge) {
  AnswerVerdict verdict = MatchAnswer(submitted, key);
  if (verdict.passed || judge == nullptr || !IsNearMiss(submitted, key)) return verdict;
  auto opinion = judge->Judge(question, key, submitted);
  if (!opinion.ok()) return opinion.status().WithContext("the rubric judge " + judge->name());
  if (!opinion->equivalent) {
    verdict.reasons.push_back("the rubric judge " + judge->name() + " found it different");
    return verdict;
  }
  verdict.passed = true;
  verdict.score = 1;
  verdict.reasons = {"accepted by the rubric judge " + judge->name() +
                     " (the exact match failed; the answer holds the expected words)"};
  return verdict;
}

}  // namespace envforge::search
