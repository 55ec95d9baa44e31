// Folding a kernel's iopub messages for one execute into nbformat 4 outputs, under size caps.
//
// Kept: `stream` (consecutive chunks of one stream merged), `execute_result` and `display_data`
// with their text/plain and image/png (base64) data only, `error` (ename, evalue, traceback
// without ANSI escapes), `clear_output` (wait=true clears at the next output) and
// `update_display_data` (replaces the data of the earlier output with the same display_id).
//
// Caps: text (stream text, text/plain, evalue, traceback lines) counts against caps.text_bytes
// across the whole execute; past it the text is cut and the rest dropped, counted, and reported
// by one final stderr stream output "[output truncated: ...]". An image larger than
// caps.image_bytes (base64) is replaced by a text/plain note naming its size. Not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "sandbox/jupyter/jupyter_message.h"

namespace envforge::sandbox::jupyter {

struct OutputCaps {
  size_t text_bytes = 64 << 10;
  size_t image_bytes = 1 << 20;
};

// `text` without ANSI escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ESC \",
// two-byte escapes).
std::string StripAnsi(std::string_view text);

class OutputCollector {
 public:
  explicit OutputCollector(OutputCaps caps = {}) : caps_(caps) {}

  // Folds one iopub message in; types other than those above are ignored.
  void Add(const JupyterMessage& message);

  // The outputs so far (nbformat 4 output dicts), with the truncation note last when text was
  // dropped.
  Json outputs() const;
  bool truncated() const { return dropped_bytes_ > 0; }
  size_t dropped_bytes() const { return dropped_bytes_; }
  // The last `error` output's {ename, evalue, traceback}, or null.
  const Json& error() const { return error_; }

 private:
  void Append(Json output, std::string display_id = "");
  // Takes what the text budget still allows of `text`, counting the rest as dropped.
  std::string Budgeted(std::string_view text);
  Json KeptData(const Json& data);
  void ClearIfPending();

  OutputCaps caps_;
  Json outputs_ = Json::array();
  std::vector<std::string> display_ids_;  // per output, "" when it has none
  size_t text_used_ = 0;
  size_t dropped_bytes_ = 0;
  bool clear_pending_ = false;
  Json error_;
};

}  // namespace envforge::sandbox::jupyter
