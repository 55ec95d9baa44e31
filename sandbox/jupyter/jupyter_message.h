// Jupyter messages on the wire (messaging spec 5.x): the multipart frames
//   [routing identities..., "<IDS|MSG>", signature, header, parent_header, metadata, content,
//    buffers...]
// and the headers envforge's client writes.
//
// Contract: DecodeMessage treats the frames as untrusted: a missing delimiter, too few frames, a
// part that is not a JSON object (or nests deeper than kMaxJsonDepth), a header without a string
// msg_type are InvalidArgument; a signature that does not verify is Unauthenticated. Nothing is
// parsed before the signature checked out.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "base/status.h"
#include "sandbox/jupyter/message_signer.h"

namespace envforge::sandbox::jupyter {

inline constexpr std::string_view kDelimiter = "<IDS|MSG>";
// The protocol version envforge speaks; ipykernel 6 answers with 5.3.
inline constexpr std::string_view kProtocolVersion = "5.3";

struct JupyterMessage {
  std::vector<std::string> identities;  // ROUTER routing frames (and the iopub topic)
  Json header = Json::object();
  Json parent_header = Json::object();
  Json metadata = Json::object();
  Json content = Json::object();
  std::vector<std::string> buffers;
  std::string signature;  // as received (decoding) or as sent (encoding)

  std::string type() const;       // header.msg_type
  std::string id() const;         // header.msg_id
  std::string parent_id() const;  // parent_header.msg_id, "" when there is none
};

// A header for a new message: a fresh random msg_id, `session_id`, username "envforge", the
// current UTC time (ISO 8601 with microseconds) and kProtocolVersion.
Json NewHeader(std::string_view msg_type, std::string_view session_id);
// 32 random lower-case hex digits (msg_id, session ids, connection keys).
std::string RandomHexId();

// The frames of `message`, signed; message.identities go first.
std::vector<std::string> EncodeMessage(const JupyterMessage& message, const MessageSigner& signer);
// The message in `frames`, its signature verified (see the contract above).
Result<JupyterMessage> DecodeMessage(std::vector<std::string> frames, const MessageSigner& signer);

}  // namespace envforge::sandbox::jupyter
