#include "base/regex.h"

#include <oniguruma.h>

#include <mutex>
#include <utility>

namespace envforge {
namespace {

// Bounds the backtracking of one search; generous for real patterns (a tokenizer's Split on a
// megabyte of text stays far below it), small enough that a pathological pattern fails in well
// under a second.
constexpr unsigned long kRetryLimitInSearch = 10'000'000;

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

}  // namespace

struct Regex::Compiled {
  std::string pattern;
  OnigRegex regex = nullptr;
  ~Compiled() {
    if (regex) onig_free(regex);
  }
};

Regex::Regex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}

Result<Regex> Regex::Compile(std::string_view pattern, RegexSyntax syntax) {
  InitializeOnce();
  auto compiled = std::make_shared<Compiled>();
  compiled->pattern = std::string(pattern);
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
  if (from > subject.size()) return std::optional<Match>();
  std::unique_ptr<OnigRegion, RegionDeleter> region(onig_region_new());
  std::unique_ptr<OnigMatchParam, MatchParamDeleter> param(onig_new_match_param());
  if (!region || !param) return ResourceExhaustedError("regex: out of memory");
  onig_initialize_match_param(param.get());
  onig_set_retry_limit_in_search_of_match_param(param.get(), kRetryLimitInSearch);
  const auto* base = reinterpret_cast<const OnigUChar*>(subject.data());
  const OnigUChar* end = base + subject.size();
  const int position = onig_search_with_param(compiled_->regex, base, end, base + from, end, region.get(),
                                              ONIG_OPTION_NONE, param.get());
  if (position == ONIG_MISMATCH) return std::optional<Match>();
  if (position < 0) {
    const std::string what = OnigMessage(position, nullptr);
    if (position == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER || position == ONIGERR_RETRY_LIMIT_IN_MATCH_OVER ||
        position == ONIGERR_MATCH_STACK_LIMIT_OVER) {
      return ResourceExhaustedError("regex '" + compiled_->pattern + "': " + what);
    }
    return InternalError("regex '" + compiled_->pattern + "': " + what);
  }
  return std::optional<Match>(Match{static_cast<size_t>(region->beg[0]), static_cast<size_t>(region->end[0])});
}

Result<bool> Regex::Search(std::string_view subject) const {
  ENVFORGE_ASSIGN_OR_RETURN(std::optional<Match> match, Find(subject));
  return match.has_value();
}

const std::string& Regex::pattern() const { return compiled_->pattern; }

}  // namespace envforge
