// Streaming of one choice (server/openai_api.h, "stream": true): the backend hands over generated
// text piece by piece (CompletionRequest::on_text) in the DSV32 layout
//     [reasoning "</think>"] content ["\n\n<｜DSML｜function_calls>" ...] [EOS]
// and the client wants delta.reasoning_content, then delta.content, then the parsed tool calls.
// DeltaSplitter routes each piece to its side and holds back any tail that may be the start of a
// marker ("</think>", the DSML block, EOS, a stop string), so that no marker text ever reaches
// the client. Finish reconciles with the parsed message: the streamed text is a prefix of the
// final text, and the rest is sent then, so the concatenated deltas equal the non-streamed answer.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace envforge::server::internal {

struct TextDelta {
  std::string reasoning;
  std::string content;
  bool empty() const { return reasoning.empty() && content.empty(); }
};

class DeltaSplitter {
 public:
  // thinking: the text starts with reasoning (chat in thinking mode). raw: /v1/completions, no
  // chat markers (only stop strings and EOS end the text).
  DeltaSplitter(bool thinking, bool raw, std::vector<std::string> stops);

  // What of `piece` (appended to what came before) may be sent now.
  TextDelta Feed(std::string_view piece);
  // What remains to send so that the client holds exactly final_reasoning and final_content.
  // When the text already sent is not a prefix of the final one (a backend that reports other
  // text than it streamed), nothing can be taken back: only the missing tail is sent, if any.
  TextDelta Finish(const std::string& final_reasoning, const std::string& final_content);

 private:
  enum class Phase { kReasoning, kContent, kDone };
  // Moves what is safe from pending_ into `out`; true when it made progress.
  bool Step(TextDelta& out);

  Phase phase_;
  std::vector<std::string> content_markers_;
  std::string pending_;
  std::string sent_reasoning_;
  std::string sent_content_;
};

// The length of the longest tail of `text` that is a proper prefix of one of `markers`.
size_t MarkerPrefixTail(std::string_view text, const std::vector<std::string>& markers);

}  // namespace envforge::server::internal
