// The Jupyter wire layer without a kernel: HMAC-SHA256 signatures, frame encoding and decoding
// (untrusted input), connection files, and folding iopub messages into nbformat outputs.
#include <doctest/doctest.h>

#include <array>
#include <string>
#include <vector>

#include "sandbox/jupyter/execute_outputs.h"
#include "sandbox/jupyter/jupyter_message.h"
#include "sandbox/jupyter/kernel_connection.h"
#include "sandbox/jupyter/message_signer.h"

namespace envforge::sandbox::jupyter {
namespace {

JupyterMessage Iopub(const std::string& type, Json content, Json parent = Json::object()) {
  JupyterMessage message;
  message.header = NewHeader(type, "kernel-session");
  message.parent_header = std::move(parent);
  message.content = std::move(content);
  return message;
}

TEST_SUITE("sandbox.jupyter.protocol") {
  TEST_CASE("the signature is HMAC-SHA256 in hex (RFC 4231 case 2), and empty without a key") {
    MessageSigner signer("Jefe");
    const std::array<std::string_view, 2> parts = {"what do ya want ", "for nothing?"};
    CHECK(signer.Sign(parts) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CHECK(signer.Verify(parts, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"));
    CHECK_FALSE(signer.Verify(parts, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3842"));
    CHECK_FALSE(signer.Verify(parts, ""));
    MessageSigner unsigned_signer("");
    CHECK(unsigned_signer.Sign(parts).empty());
    CHECK(unsigned_signer.Verify(parts, ""));
    CHECK_FALSE(unsigned_signer.Verify(parts, "00"));
  }

  TEST_CASE("a message survives encoding and decoding; any changed byte is refused") {
    MessageSigner signer(RandomHexId());
    JupyterMessage message = Iopub("stream", {{"name", "stdout"}, {"text", "héllo\n"}});
    message.identities = {"route-1"};
    message.buffers = {std::string("\0\1", 2)};
    std::vector<std::string> frames = EncodeMessage(message, signer);
    REQUIRE(frames.size() == 8);
    CHECK(frames[1] == kDelimiter);
    CHECK(frames[2].size() == 64);

    Result<JupyterMessage> decoded = DecodeMessage(frames, signer);
    REQUIRE(decoded.ok());
    CHECK(decoded->identities == std::vector<std::string>{"route-1"});
    CHECK(decoded->type() == "stream");
    CHECK(decoded->id() == message.id());
    CHECK(decoded->content == message.content);
    CHECK(decoded->buffers == message.buffers);
    CHECK(decoded->header["version"] == "5.3");

    for (size_t frame = 3; frame <= 6; ++frame) {
      std::vector<std::string> tampered = frames;
      tampered[frame][tampered[frame].size() / 2] ^= 1;
      Result<JupyterMessage> refused = DecodeMessage(tampered, signer);
      REQUIRE_FALSE(refused.ok());
      CHECK(refused.status().code() == StatusCode::kUnauthenticated);
    }
    Result<JupyterMessage> other_key = DecodeMessage(frames, MessageSigner("another key"));
    CHECK(other_key.status().code() == StatusCode::kUnauthenticated);
  }

  TEST_CASE("malformed frames are InvalidArgument and name what is wrong") {
    MessageSigner signer("k");
    JupyterMessage message = Iopub("status", {{"execution_state", "idle"}});
    std::vector<std::string> frames = EncodeMessage(message, signer);

    std::vector<std::string> no_delimiter = frames;
    no_delimiter[0] = "<IDS|MSX>";
    CHECK(DecodeMessage(no_delimiter, signer).status().message().find("delimiter") != std::string::npos);

    std::vector<std::string> short_frames(frames.begin(), frames.begin() + 4);
    CHECK(DecodeMessage(short_frames, signer).status().message().find("at least 5") != std::string::npos);

    auto signed_with = [&](std::array<std::string, 4> parts) {
      const std::array<std::string_view, 4> views = {parts[0], parts[1], parts[2], parts[3]};
      std::vector<std::string> out = {std::string(kDelimiter), signer.Sign(views)};
      for (std::string& part : parts) out.push_back(part);
      return DecodeMessage(out, signer);
    };
    Result<JupyterMessage> not_object = signed_with({"[1]", "{}", "{}", "{}"});
    CHECK(not_object.status().code() == StatusCode::kInvalidArgument);
    CHECK(not_object.status().message().find("header is not a JSON object") != std::string::npos);
    CHECK(signed_with({"{}", "{}", "{}", "{}"}).status().message().find("msg_type") != std::string::npos);
    CHECK(signed_with({R"({"msg_type":"x"})", "{", "{}", "{}"}).status().code() == StatusCode::kInvalidArgument);
    const std::string deep = std::string(200, '[') + std::string(200, ']');
    CHECK(signed_with({R"({"msg_type":"x"})", "{}", "{}", R"({"a":)" + deep + "}"}).status().message().find("deeper") !=
          std::string::npos);
  }

  TEST_CASE("connection files: ipc and tcp addresses, and every bad field named") {
    ConnectionInfo info;
    info.ip = "/k/sock/kernel";
    info.key = "abc";
    CHECK(info.Address(Channel::kShell) == "ipc:///k/sock/kernel-1");
    CHECK(info.Address(Channel::kHeartbeat) == "ipc:///k/sock/kernel-5");
    Result<ConnectionInfo> round = ConnectionInfo::FromJson(info.ToJson());
    REQUIRE(round.ok());
    CHECK(round->ToJson() == info.ToJson());

    Json tcp = info.ToJson();
    tcp["transport"] = "tcp";
    tcp["ip"] = "127.0.0.1";
    tcp["iopub_port"] = 5555;
    CHECK(ConnectionInfo::FromJson(tcp)->Address(Channel::kIopub) == "tcp://127.0.0.1:5555");

    Json bad = info.ToJson();
    bad["shell_port"] = "1";
    CHECK(ConnectionInfo::FromJson(bad).status().message().find("'shell_port' must be a port number") !=
          std::string::npos);
    bad = info.ToJson();
    bad["transport"] = "udp";
    CHECK(ConnectionInfo::FromJson(bad).status().message().find("udp") != std::string::npos);
    bad = info.ToJson();
    bad["signature_scheme"] = "hmac-md5";
    CHECK(ConnectionInfo::FromJson(bad).status().message().find("hmac-md5") != std::string::npos);
    bad = info.ToJson();
    bad.erase("key");
    CHECK(ConnectionInfo::FromJson(bad).status().message().find("'key'") != std::string::npos);
  }

  TEST_CASE("ANSI escapes are stripped from tracebacks") {
    CHECK(StripAnsi("\x1b[0;31mZeroDivisionError\x1b[0m: division by zero") == "ZeroDivisionError: division by zero");
    CHECK(StripAnsi("a\x1b]0;title\x07"
                    "b\x1b]8;;http://x\x1b\\c") == "abc");
    CHECK(StripAnsi("plain\ttext\n") == "plain\ttext\n");
    CHECK(StripAnsi("cut\x1b[") == "cut");
  }

  TEST_CASE("outputs: streams merge, results and displays keep text and png, errors lose their colours") {
    OutputCollector collector;
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "a"}}));
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "b\n"}}));
    collector.Add(Iopub("stream", {{"name", "stderr"}, {"text", "warn\n"}}));
    collector.Add(
        Iopub("display_data", {{"data", {{"text/plain", "<Figure>"}, {"image/png", "iVBORw0K"}, {"text/html", "<b>"}}},
                               {"metadata", Json::object()}}));
    collector.Add(Iopub("execute_result",
                        {{"execution_count", 3}, {"data", {{"text/plain", "2"}}}, {"metadata", Json::object()}}));
    collector.Add(Iopub(
        "error", {{"ename", "ValueError"}, {"evalue", "bad"}, {"traceback", {"\x1b[31mValueError\x1b[0m: bad"}}}));
    collector.Add(Iopub("status", {{"execution_state", "idle"}}));
    const Json outputs = collector.outputs();
    REQUIRE(outputs.size() == 5);
    CHECK(outputs[0] == Json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "ab\n"}});
    CHECK(outputs[1]["name"] == "stderr");
    CHECK(outputs[2]["data"] == Json{{"text/plain", "<Figure>"}, {"image/png", "iVBORw0K"}});
    CHECK(outputs[3]["execution_count"] == 3);
    CHECK(outputs[3]["data"]["text/plain"] == "2");
    CHECK(outputs[4]["traceback"][0] == "ValueError: bad");
    CHECK(collector.error()["ename"] == "ValueError");
    CHECK_FALSE(collector.truncated());
  }

  TEST_CASE("outputs: past the text cap the rest is dropped and counted; a large image becomes a note") {
    OutputCollector collector(OutputCaps{.text_bytes = 10, .image_bytes = 4});
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "0123456789abcdef"}}));
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "more"}}));
    collector.Add(Iopub("display_data", {{"data", {{"image/png", "AAAAAAAA"}}}}));
    const Json outputs = collector.outputs();
    CHECK(collector.truncated());
    CHECK(collector.dropped_bytes() == 10);
    CHECK(outputs[0]["text"] == "0123456789");
    CHECK(outputs[1]["data"]["text/plain"].get<std::string>().find("image/png of 8 base64 bytes not kept") !=
          std::string::npos);
    CHECK_FALSE(outputs[1]["data"].contains("image/png"));
    CHECK(outputs.back()["text"].get<std::string>().find(
              "[output truncated: 10 more bytes not shown; the cap is 10 bytes]") != std::string::npos);

    OutputCollector utf8(OutputCaps{.text_bytes = 2, .image_bytes = 4});
    utf8.Add(Iopub("stream", {{"name", "stdout"}, {"text", "aé"}}));  // é is two bytes: cut before it
    CHECK(utf8.outputs()[0]["text"] == "a");
  }

  TEST_CASE("outputs: clear_output (now and at the next output) and update_display_data") {
    OutputCollector collector;
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "old"}}));
    collector.Add(Iopub("clear_output", {{"wait", false}}));
    CHECK(collector.outputs().empty());
    collector.Add(Iopub("stream", {{"name", "stdout"}, {"text", "kept until the next output"}}));
    collector.Add(Iopub("clear_output", {{"wait", true}}));
    CHECK(collector.outputs().size() == 1);
    collector.Add(Iopub("display_data", {{"data", {{"text/plain", "v1"}}}, {"transient", {{"display_id", "d"}}}}));
    collector.Add(
        Iopub("update_display_data", {{"data", {{"text/plain", "v2"}}}, {"transient", {{"display_id", "d"}}}}));
    const Json outputs = collector.outputs();
    REQUIRE(outputs.size() == 1);
    CHECK(outputs[0]["data"]["text/plain"] == "v2");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::sandbox::jupyter
