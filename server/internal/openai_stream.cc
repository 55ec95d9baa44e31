#include "server/internal/openai_stream.h"

#include <algorithm>
#include <utility>

#include "inference/chat_format.h"

namespace envforge::server::internal {
namespace {

// Where the first of `markers` starts in `text` (npos when none does).
size_t FirstMarker(std::string_view text, const std::vector<std::string>& markers) {
  size_t first = std::string_view::npos;
  for (const auto& marker : markers) first = std::min(first, text.find(marker));
  return first;
}

// The part of `final_text` not sent yet, when `sent` is a prefix of it.
std::string Remainder(const std::string& sent, const std::string& final_text) {
  if (final_text.size() <= sent.size() || final_text.compare(0, sent.size(), sent) != 0) return {};
  return final_text.substr(sent.size());
}

}  // namespace

size_t MarkerPrefixTail(std::string_view text, const std::vector<std::string>& markers) {
  size_t longest = 0;
  for (const auto& marker : markers) {
    for (size_t keep = std::min(text.size(), marker.size() - 1); keep > longest; --keep) {
      if (text.substr(text.size() - keep) == std::string_view(marker).substr(0, keep)) {
        longest = keep;
        break;
      }
    }
  }
  return longest;
}

DeltaSplitter::DeltaSplitter(bool thinking, bool raw, std::vector<std::string> stops)
    : phase_(thinking && !raw ? Phase::kReasoning : Phase::kContent), content_markers_(std::move(stops)) {
  content_markers_.emplace_back(inference::kEosToken);
  if (!raw) content_markers_.push_back(std::string("\n\n<").append(inference::kDsmlMarker).append("function_calls>"));
  if (!raw) content_markers_.push_back(std::string("<").append(inference::kDsmlMarker).append("function_calls>"));
}

TextDelta DeltaSplitter::Feed(std::string_view piece) {
  TextDelta out;
  if (phase_ == Phase::kDone) return out;
  pending_.append(piece);
  while (Step(out)) {
  }
  sent_reasoning_ += out.reasoning;
  sent_content_ += out.content;
  return out;
}

bool DeltaSplitter::Step(TextDelta& out) {
  if (pending_.empty() || phase_ == Phase::kDone) return false;
  if (phase_ == Phase::kReasoning) {
    static const std::vector<std::string> kThinkEnd = {std::string(inference::kThinkEnd)};
    size_t end = pending_.find(inference::kThinkEnd);
    if (end != std::string::npos) {
      out.reasoning += pending_.substr(0, end);
      pending_.erase(0, end + inference::kThinkEnd.size());
      phase_ = Phase::kContent;
      return true;
    }
    size_t safe = pending_.size() - MarkerPrefixTail(pending_, kThinkEnd);
    out.reasoning += pending_.substr(0, safe);
    pending_.erase(0, safe);
    return false;
  }
  size_t end = FirstMarker(pending_, content_markers_);
  if (end != std::string::npos) {
    out.content += pending_.substr(0, end);
    pending_.clear();
    phase_ = Phase::kDone;  // tool calls and what follows come parsed, at the end
    return false;
  }
  size_t safe = pending_.size() - MarkerPrefixTail(pending_, content_markers_);
  out.content += pending_.substr(0, safe);
  pending_.erase(0, safe);
  return false;
}

TextDelta DeltaSplitter::Finish(const std::string& final_reasoning, const std::string& final_content) {
  TextDelta out;
  out.reasoning = Remainder(sent_reasoning_, final_reasoning);
  out.content = Remainder(sent_content_, final_content);
  sent_reasoning_ += out.reasoning;
  sent_content_ += out.content;
  phase_ = Phase::kDone;
  return out;
}

}  // namespace envforge::server::internal
