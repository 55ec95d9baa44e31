// Jupyter wire frames: encoding, signature checks, parsing.
#include "sandbox/jupyter/jupyter_message.h"

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <random>

namespace envforge::sandbox::jupyter {
namespace {

std::string StringField(const Json& object, const char* name) {
  auto it = object.find(name);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string IsoUtcNow() {
  const auto now = std::chrono::system_clock::now();
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[96];
  std::snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(micros % 1000000));
  return text;
}

Result<Json> ParsePart(const std::string& text, const char* what) {
  ENVFORGE_ASSIGN_OR_RETURN(Json value, ParseJson(text, what));
  if (!value.is_object()) return InvalidArgumentError(std::string("Jupyter message ") + what + " is not a JSON object");
  return value;
}

}  // namespace

std::string JupyterMessage::type() const { return StringField(header, "msg_type"); }
std::string JupyterMessage::id() const { return StringField(header, "msg_id"); }
std::string JupyterMessage::parent_id() const { return StringField(parent_header, "msg_id"); }

std::string RandomHexId() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  char text[33];
  std::snprintf(text, sizeof(text), "%016llx%016llx", static_cast<unsigned long long>(generator()),
                static_cast<unsigned long long>(generator()));
  return text;
}

Json NewHeader(std::string_view msg_type, std::string_view session_id) {
  return {{"msg_id", RandomHexId()}, {"session", session_id}, {"username", "envforge"},
          {"date", IsoUtcNow()},     {"msg_type", msg_type},  {"version", kProtocolVersion}};
}

std::vector<std::string> EncodeMessage(const JupyterMessage& message, const MessageSigner& signer) {
  std::vector<std::string> frames = message.identities;
  const std::array<std::string, 4> parts = {message.header.dump(), message.parent_header.dump(),
                                            message.metadata.dump(), message.content.dump()};
  const std::array<std::string_view, 4> views = {parts[0], parts[1], parts[2], parts[3]};
  frames.emplace_back(kDelimiter);
  frames.push_back(signer.Sign(views));
  for (const std::string& part : parts) frames.push_back(part);
  for (const std::string& buffer : message.buffers) frames.push_back(buffer);
  return frames;
}

Result<JupyterMessage> DecodeMessage(std::vector<std::string> frames, const MessageSigner& signer) {
  size_t delimiter = 0;
  while (delimiter < frames.size() && frames[delimiter] != kDelimiter) ++delimiter;
  if (delimiter == frames.size()) return InvalidArgumentError("Jupyter message without the <IDS|MSG> delimiter");
  if (frames.size() - delimiter < 6) {
    return InvalidArgumentError("Jupyter message with " + std::to_string(frames.size() - delimiter - 1) +
                                " frames after the delimiter; at least 5 (signature, header, parent_header, "
                                "metadata, content) are required");
  }
  const size_t first = delimiter + 2;
  const std::array<std::string_view, 4> views = {frames[first], frames[first + 1], frames[first + 2],
                                                 frames[first + 3]};
  if (!signer.Verify(views, frames[delimiter + 1])) {
    return UnauthenticatedError("Jupyter message with a signature that does not match its contents");
  }
  JupyterMessage message;
  message.identities.assign(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(delimiter));
  message.signature = std::move(frames[delimiter + 1]);
  ENVFORGE_ASSIGN_OR_RETURN(message.header, ParsePart(frames[first], "header"));
  ENVFORGE_ASSIGN_OR_RETURN(message.parent_header, ParsePart(frames[first + 1], "parent_header"));
  ENVFORGE_ASSIGN_OR_RETURN(message.metadata, ParsePart(frames[first + 2], "metadata"));
  ENVFORGE_ASSIGN_OR_RETURN(message.content, ParsePart(frames[first + 3], "content"));
  if (message.type().empty()) return InvalidArgumentError("Jupyter message header without a string msg_type");
  for (size_t i = first + 4; i < frames.size(); ++i) message.buffers.push_back(std::move(frames[i]));
  return message;
}

}  // namespace envforge::sandbox::jupyter
