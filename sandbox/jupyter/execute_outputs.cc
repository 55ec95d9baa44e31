// iopub messages -> nbformat outputs.
#include "sandbox/jupyter/execute_outputs.h"

namespace envforge::sandbox::jupyter {
namespace {

// Cuts `text` to at most `limit` bytes without splitting a UTF-8 sequence.
size_t Utf8Cut(std::string_view text, size_t limit) {
  if (limit >= text.size()) return text.size();
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

std::string TextOf(const Json& value) {
  // nbformat allows multiline strings as lists of lines.
  if (value.is_string()) return value.get<std::string>();
  std::string joined;
  if (value.is_array()) {
    for (const Json& line : value) {
      if (line.is_string()) joined += line.get<std::string>();
    }
  }
  return joined;
}

std::string DisplayIdOf(const JupyterMessage& message) {
  auto transient = message.content.find("transient");
  if (transient == message.content.end() || !transient->is_object()) return "";
  auto id = transient->find("display_id");
  return id != transient->end() && id->is_string() ? id->get<std::string>() : "";
}

}  // namespace

std::string StripAnsi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out += text[i];
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char kind = text[i + 1];
    if (kind == '[') {  // CSI: parameters and intermediates, then one final byte in @..~
      size_t j = i + 2;
      while (j < text.size() && !(text[j] >= '@' && text[j] <= '~')) ++j;
      i = j;
    } else if (kind == ']') {  // OSC: up to BEL or ESC backslash
      size_t j = i + 2;
      while (j < text.size() && text[j] != '\a' && !(text[j] == '\x1b' && j + 1 < text.size() && text[j + 1] == '\\'))
        ++j;
      i = (j < text.size() && text[j] == '\x1b') ? j + 1 : j;
    } else {
      i += 1;  // a two-byte escape
    }
  }
  return out;
}

std::string OutputCollector::Budgeted(std::string_view text) {
  const size_t room = caps_.text_bytes > text_used_ ? caps_.text_bytes - text_used_ : 0;
  const size_t kept = Utf8Cut(text, room);
  text_used_ += kept;
  dropped_bytes_ += text.size() - kept;
  return std::string(text.substr(0, kept));
}

Json OutputCollector::KeptData(const Json& data) {
  Json kept = Json::object();
  if (!data.is_object()) return kept;
  if (auto plain = data.find("text/plain"); plain != data.end()) kept["text/plain"] = Budgeted(TextOf(*plain));
  if (auto png = data.find("image/png"); png != data.end() && png->is_string()) {
    const std::string& base64 = png->get_ref<const std::string&>();
    if (base64.size() <= caps_.image_bytes) {
      kept["image/png"] = base64;
    } else {
      const std::string note = "[image/png of " + std::to_string(base64.size()) + " base64 bytes not kept: over the " +
                               std::to_string(caps_.image_bytes) + "-byte image cap]";
      kept["text/plain"] = kept.value("text/plain", std::string()) + (kept.contains("text/plain") ? "\n" : "") + note;
    }
  }
  return kept;
}

void OutputCollector::ClearIfPending() {
  if (!clear_pending_) return;
  clear_pending_ = false;
  outputs_ = Json::array();
  display_ids_.clear();
}

void OutputCollector::Append(Json output, std::string display_id) {
  outputs_.push_back(std::move(output));
  display_ids_.push_back(std::move(display_id));
}

void OutputCollector::Add(const JupyterMessage& message) {
  const std::string type = message.type();
  const Json& content = message.content;
  if (type == "clear_output") {
    clear_pending_ = true;
    if (!content.value("wait", false)) ClearIfPending();
    return;
  }
  if (type == "stream") {
    ClearIfPending();
    const std::string name = content.value("name", "stdout") == "stderr" ? "stderr" : "stdout";
    std::string text = Budgeted(TextOf(content.value("text", Json())));
    if (!outputs_.empty() && outputs_.back()["output_type"] == "stream" && outputs_.back()["name"] == name) {
      outputs_.back()["text"] = outputs_.back()["text"].get<std::string>() + text;
    } else if (!text.empty()) {
      Append({{"output_type", "stream"}, {"name", name}, {"text", std::move(text)}});
    }
  } else if (type == "execute_result" || type == "display_data") {
    ClearIfPending();
    Json output = {
        {"output_type", type}, {"data", KeptData(content.value("data", Json()))}, {"metadata", Json::object()}};
    if (type == "execute_result") output["execution_count"] = content.value("execution_count", Json());
    Append(std::move(output), DisplayIdOf(message));
  } else if (type == "update_display_data") {
    const std::string id = DisplayIdOf(message);
    for (size_t i = 0; i < outputs_.size() && !id.empty(); ++i) {
      if (display_ids_[i] == id) outputs_[i]["data"] = KeptData(content.value("data", Json()));
    }
  } else if (type == "error") {
    ClearIfPending();
    Json traceback = Json::array();
    for (const Json& line : content.value("traceback", Json::array())) {
      if (line.is_string()) traceback.push_back(Budgeted(StripAnsi(line.get<std::string>())));
    }
    error_ = {{"ename", content.value("ename", "")},
              {"evalue", Budgeted(content.value("evalue", ""))},
              {"traceback", std::move(traceback)}};
    Json output = error_;
    output["output_type"] = "error";
    Append(std::move(output));
  }
}

Json OutputCollector::outputs() const {
  Json all = outputs_;
  if (dropped_bytes_ > 0) {
    all.push_back(
        {{"output_type", "stream"},
         {"name", "stderr"},
         {"text", "\n[output truncated: " + std::to_string(dropped_bytes_) + " more bytes not shown; the cap is " +
                      std::to_string(caps_.text_bytes) + " bytes]\n"}});
  }
  return all;
}

}  // namespace envforge::sandbox::jupyter
