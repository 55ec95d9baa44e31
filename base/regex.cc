#include "base/regex.h"

#include <oniguruma.h>

#include <mutex>
#include <utility>

namespace envforge {
namespace {

// Bounds the backtracking of one search (RegexBound::kSearch) or of one match attempt
// (kEachMatch, Oniguruma's own default); generous for real patterns, small enough that a
// pathological pattern fails in well under a second per attempt.
constexpr unsigned long kRetryLimit = 10'000'000;

void InitializeOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

OnigSyntaxType* SyntaxFor(RegexSyntax syntax) {
  switch (syntax) {
    case RegexSyntax::kOniguruma: return ONIG_SYNTAX_ONIGURUMA;
    case RegexSyntax::kPerl: return ONIG_SYNTAX_PERL_NG;
  }
  return ONIG_SYNTAX_ONIGURUMA;
}

std::string OnigMessage(int code, OnigErrorInfo* info) {
  OnigUChar buffer[ONIG_MAX_ERROR_MESSAGE_LEN];
  const int length = info ? onig_error_code_to_str(buffer, code, info) : onig_error_code_to_str(buffer, code);
  return std::string(reinterpret_cast<const char*>(buffer), length > 0 ? static_cast<size_t>(length) : 0);
}

struct RegionDeleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, 1); }
};
struct MatchParamDeleter {
  void operator()(OnigMatchParam* param) const { onig_free_match_param(param); }
};

// One region and one match parameter block per thread, reused by every Find: a tokenizer calls
// Find once per pre-token, and two allocations per call would cost more than many searches.
// Find never calls out while it holds them, so reuse cannot nest.
struct SearchState {
  std::unique_ptr<OnigRegion, RegionDeleter> region{onig_region_new()};
  std::unique_ptr<OnigMatchParam, MatchParamDeleter> param{onig_new_match_param()};
};

}  // namespace

struct Regex::Compiled {
  std::string pattern;
  RegexBound bound = RegexBound::kSearch;
  OnigRegex regex = nullptr;
  ~Compiled() {
    if (regex) onig_free(regex);
  }
};

Regex::Regex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}

Result<Regex> Regex::Compile(std::string_view pattern, RegexSyntax syntax, RegexBound bound) {
  InitializeOnce();
  auto compiled = std::make_shared<Compiled>();
  compiled->pattern = std::string(pattern);
  compiled->bound = bound;
  const auto* begin = reinterpret_cast<const OnigUChar*>(compiled->pattern.data());
  OnigErrorInfo info;
  const int code = onig_new(&compiled->regex, begin, begin + compiled->pattern.size(), ONIG_OPTION_CAPTURE_GROUP,
                            ONIG_ENCODING_UTF8, SyntaxFor(syntax), &info);
  if (code != ONIG_NORMAL) {
    compiled->regex = nullptr;
    return InvalidArgumentError("regex '" + compiled->pattern + "': " + OnigMessage(code, &info));
  }
  return Regex(std::move(compiled));
}

Result<std::optional<Regex::Match>> Regex::Find(std::string_view subject, size_t from) const {
  return Find(subject, from, nullptr);
}

Result<std::optional<Regex::Match>> Regex::Find(std::string_view subject, size_t from,
                                                std::vector<std::optional<Match>>* groups) const {
  if (groups) groups->clear();
  if (from > subject.size()) return std::optional<Match>();
  thread_local SearchState state;
  OnigRegion* region = state.region.get();
  OnigMatchParam* param = state.param.get();
  if (!region || !param) return ResourceExhaustedError("regex: out of memory");
  onig_initialize_match_param(param);
  if (compiled_->bound == RegexBound::kSearch) {
    onig_set_retry_limit_in_search_of_match_param(param, kRetryLimit);
  } else {
    onig_set_retry_limit_in_match_of_match_param(param, kRetryLimit);
  }
  const auto* base = reinterpret_cast<const OnigUChar*>(subject.data());
  const OnigUChar* end = base + subject.size();
  const int position =
      onig_search_with_param(compiled_->regex, base, end, base + from, end, region, ONIG_OPTION_NONE, param);
  if (position == ONIG_MISMATCH) return std::optional<Match>();
  if (position < 0) {
    const std::string what = OnigMessage(position, nullptr);
    if (position == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER || position == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER ||
        position == ONIGERR_MATCH_STACK_LIMIT_OVER) {
      return ResourceExhaustedError("regex '" + compiled_->pattern + "': " + what);
    }
    return InternalError("regex '" + compiled_->pattern + "': " + what);
  }
  if (groups) {
    for (int i = 1; i < region->num_regs; ++i) {
      if (region->beg[i] == ONIG_REGION_NOTPOS) {
        groups->emplace_back();
      } else {
        groups->emplace_back(Match{static_cast<size_t>(region->beg[i]), static_cast<size_t>(region->end[i])});
      }
    }
  }
  return std::optional<Match>(Match{static_cast<size_t>(region->beg[0]), static_cast<size_t>(region->end[0])});
}

Result<bool> Regex::Search(std::string_view subject) const {
  ENVFORGE_ASSIGN_OR_RETURN(std::optional<Match> match, Find(subject));
  return match.has_value();
}

const std::string& Regex::pattern() const { return compiled_->pattern; }

int Regex::group_count() const { return onig_number_of_captures(compiled_->regex); }

}  // namespace envforge
