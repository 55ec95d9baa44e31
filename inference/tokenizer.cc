#include "inference/tokenizer.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <unordered_map>
#include <utility>

#include "base/fd.h"
#include "base/json.h"
#include "inference/internal/bpe_model.h"
#include "inference/internal/byte_level.h"
#include "inference/internal/pre_tokenizer.h"
#include "inference/internal/utf8.h"

namespace envforge::inference {

using internal::BpeModel;
using internal::PreTokenizer;

namespace {

Status FieldError(const std::string& path, std::string_view what) {
  return InvalidArgumentError("tokenizer.json: " + path + ": " + std::string(what));
}

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// The raw bytes a byte-level vocabulary entry stands for; nullopt when some character is outside
// the byte alphabet (such entries decode to their own UTF-8 text).
std::optional<std::string> UnmapByteLevel(std::string_view token) {
  internal::DecodedUtf8 decoded;
  internal::DecodeUtf8(token, &decoded);
  std::string bytes;
  for (char32_t cp : decoded.code_points) {
    const int byte = internal::ByteOfChar(cp);
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
  }
  return bytes;
}

// bos_token / eos_token of tokenizer_config.json: a string or {"content": ...}.
std::optional<std::string> ConfigTokenName(const Json& config, const char* key) {
  auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) return content->get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

class Tokenizer::Impl {
 public:
  static Result<std::unique_ptr<Impl>> Create(std::string_view tokenizer_json, std::string_view config_json);

  std::vector<int32_t> Encode(std::string_view text, bool parse_special) const;
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const;

  std::unordered_map<std::string, int32_t> vocab;  // byte-level token text -> id
  std::vector<std::string> id_text;                // id -> vocab text or added content
  std::vector<std::string> id_bytes;               // id -> decoded bytes
  std::vector<uint8_t> id_special;
  std::vector<AddedToken> added;  // longest content first
  std::unordered_map<std::string, int32_t> added_by_content;
  std::unordered_map<unsigned char, std::vector<size_t>> added_by_first_byte;  // indices into added
  std::optional<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
};

Result<std::unique_ptr<Tokenizer::Impl>> Tokenizer::Impl::Create(std::string_view tokenizer_json,
                                                                 std::string_view config_json) {
  ENVFORGE_ASSIGN_OR_RETURN(Json root, ParseJson(tokenizer_json, "tokenizer.json"));
  if (!root.is_object()) return FieldError("(root)", "expected an object");
  auto impl = std::make_unique<Impl>();

  // normalizer: none, or an empty Sequence.
  if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    const std::string type = it->is_object() ? it->value("type", std::string()) : std::string();
    const bool empty_sequence = type == "Sequence" && it->contains("normalizers") && (*it)["normalizers"].is_array() &&
                                (*it)["normalizers"].empty();
    if (!empty_sequence) return FieldError("normalizer.type", "unsupported normalizer '" + type + "'");
  }
  if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
    const std::string type = it->is_object() ? it->value("type", std::string()) : std::string();
    if (type != "ByteLevel") return FieldError("decoder.type", "unsupported decoder '" + type + "'");
  }

  // model
  auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) return FieldError("model", "missing");
  const Json& model = *model_it;
  if (auto type = model.find("type"); type != model.end()) {
    if (!type->is_string() || type->get<std::string>() != "BPE") {
      return FieldError("model.type", "unsupported model type " + type->dump() + " (only BPE)");
    }
  }
  if (model.value("byte_fallback", false)) return FieldError("model.byte_fallback", "unsupported true");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (auto it = model.find(key);
        it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      return FieldError(std::string("model.") + key, "unsupported value " + it->dump());
    }
  }
  if (auto it = model.find("dropout");
      it != model.end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0.0)) {
    return FieldError("model.dropout", "unsupported value " + it->dump());
  }
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object()) return FieldError("model.vocab", "missing");
  int32_t max_id = -1;
  impl->vocab.reserve(vocab_it->size());
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > (int64_t{1} << 30)) {
      return FieldError("model.vocab[" + Json(it.key()).dump() + "]", "expected a non-negative integer id");
    }
    const auto id = static_cast<int32_t>(it.value().get<int64_t>());
    impl->vocab.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }

  // added_tokens
  if (auto it = root.find("added_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) return FieldError("added_tokens", "expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& entry = (*it)[i];
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_integer() ||
          entry["id"].get<int64_t>() < 0 || entry["id"].get<int64_t>() > (int64_t{1} << 30)) {
        return FieldError(path + ".id", "expected a non-negative integer");
      }
      if (!entry.contains("content") || !entry["content"].is_string() || entry["content"].get<std::string>().empty()) {
        return FieldError(path + ".content", "expected a non-empty string");
      }
      AddedToken token;
      token.id = static_cast<int32_t>(entry["id"].get<int64_t>());
      token.content = entry["content"].get<std::string>();
      token.special = entry.value("special", false);
      token.lstrip = entry.value("lstrip", false);
      token.rstrip = entry.value("rstrip", false);
      max_id = std::max(max_id, token.id);
      impl->added_by_content[token.content] = token.id;
      impl->added.push_back(std::move(token));
    }
  }
  std::stable_sort(impl->added.begin(), impl->added.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (size_t i = 0; i < impl->added.size(); ++i) {
    impl->added_by_first_byte[static_cast<unsigned char>(impl->added[i].content[0])].push_back(i);
  }

  // id tables
  const size_t size = static_cast<size_t>(max_id + 1);
  impl->id_text.assign(size, std::string());
  impl->id_bytes.assign(size, std::string());
  impl->id_special.assign(size, 0);
  for (const auto& [text, id] : impl->vocab) {
    impl->id_text[id] = text;
    auto bytes = UnmapByteLevel(text);
    impl->id_bytes[id] = bytes ? *bytes : text;
  }
  for (const AddedToken& token : impl->added) {
    impl->id_text[token.id] = token.content;
    impl->id_bytes[token.id] = token.content;
    impl->id_special[token.id] = token.special ? 1 : 0;
  }

  // merges: "a b" strings or [a, b] pairs.
  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array()) return FieldError("model.merges", "missing");
  std::vector<BpeModel::Merge> merges;
  merges.reserve(merges_it->size());
  for (size_t i = 0; i < merges_it->size(); ++i) {
    const Json& entry = (*merges_it)[i];
    const std::string path = "model.merges[" + std::to_string(i) + "]";
    std::string left;
    std::string right;
    if (entry.is_string()) {
      const std::string text = entry.get<std::string>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return FieldError(path, "expected \"left right\" with exactly one space, got " + entry.dump());
      }
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() && entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return FieldError(path, "expected a \"left right\" string or a [left, right] pair, got " + entry.dump());
    }
    auto left_it = impl->vocab.find(left);
    auto right_it = impl->vocab.find(right);
    auto merged_it = impl->vocab.find(left + right);
    if (left_it == impl->vocab.end() || right_it == impl->vocab.end() || merged_it == impl->vocab.end()) {
      const std::string& missing = left_it == impl->vocab.end()    ? left
                                   : right_it == impl->vocab.end() ? right
                                                                   : left + right;
      return FieldError(path, "token " + Json(missing).dump() + " is not in model.vocab");
    }
    merges.push_back(BpeModel::Merge{left_it->second, right_it->second, merged_it->second});
  }

  std::vector<int32_t> byte_ids(256, -1);
  for (int b = 0; b < 256; ++b) {
    std::string text;
    internal::AppendUtf8(internal::kByteAlphabet.byte_to_char[b], &text);
    if (auto it = impl->vocab.find(text); it != impl->vocab.end()) byte_ids[b] = it->second;
  }
  std::optional<int32_t> unk;
  if (auto it = model.find("unk_token"); it != model.end() && it->is_string()) {
    auto unk_it = impl->vocab.find(it->get<std::string>());
    if (unk_it == impl->vocab.end()) return FieldError("model.unk_token", "not in model.vocab");
    unk = unk_it->second;
  }
  const bool ignore_merges = model.value("ignore_merges", false);
  std::unordered_map<std::string, int32_t> whole_pieces;
  if (ignore_merges) {
    for (const auto& [text, id] : impl->vocab) {
      if (auto bytes = UnmapByteLevel(text)) whole_pieces.emplace(*bytes, id);
    }
  }
  impl->model = std::make_unique<BpeModel>(merges, byte_ids, unk, ignore_merges, std::move(whole_pieces));

  // pre_tokenizer
  Json pre_json;
  if (auto it = root.find("pre_tokenizer"); it != root.end()) pre_json = *it;
  ENVFORGE_ASSIGN_OR_RETURN(PreTokenizer pre_tokenizer, PreTokenizer::FromJson(pre_json));
  if (!pre_tokenizer.has_byte_level()) {
    return FieldError("pre_tokenizer", "unsupported: no ByteLevel step (only byte-level BPE is supported)");
  }
  impl->pre_tokenizer = std::move(pre_tokenizer);

  // bos / eos
  Json config = Json::object();
  if (!config_json.empty()) {
    ENVFORGE_ASSIGN_OR_RETURN(config, ParseJson(config_json, "tokenizer_config.json"));
    if (!config.is_object()) return InvalidArgumentError("tokenizer_config.json: expected an object");
  }
  auto lookup = [&](std::string_view name) -> std::optional<int32_t> {
    if (auto it = impl->added_by_content.find(std::string(name)); it != impl->added_by_content.end()) {
      return it->second;
    }
    if (auto it = impl->vocab.find(std::string(name)); it != impl->vocab.end()) return it->second;
    return std::nullopt;
  };
  for (auto [key, fallback, slot] : {std::tuple{"bos_token", "<｜begin▁of▁sentence｜>", &impl->bos},
                                     std::tuple{"eos_token", "<｜end▁of▁sentence｜>", &impl->eos}}) {
    if (auto name = ConfigTokenName(config, key)) {
      *slot = lookup(*name);
      if (!*slot)
        return InvalidArgumentError(std::string("tokenizer_config.json: ") + key + ": token " + Json(*name).dump() +
                                    " is not in the vocabulary");
    } else {
      *slot = lookup(fallback);
    }
  }
  return impl;
}

void Tokenizer::Impl::EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const {
  if (text.empty()) return;
  thread_local std::vector<std::string_view> pieces;
  thread_local std::deque<std::string> storage;
  pieces.clear();
  storage.clear();
  pre_tokenizer->Split(text, &pieces, &storage);
  for (std::string_view piece : pieces) model->Encode(piece, ids);
}

std::vector<int32_t> Tokenizer::Impl::Encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  if (!parse_special || added.empty()) {
    EncodeOrdinary(text, &ids);
    return ids;
  }
  size_t segment_start = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const AddedToken* found = nullptr;
    auto candidates = added_by_first_byte.find(static_cast<unsigned char>(text[pos]));
    if (candidates != added_by_first_byte.end()) {
      for (size_t index : candidates->second) {  // longest first
        const AddedToken& token = added[index];
        if (text.compare(pos, token.content.size(), token.content) == 0) {
          found = &token;
          break;
        }
      }
    }
    if (!found) {
      ++pos;
      continue;
    }
    size_t segment_end = pos;
    size_t token_end = pos + found->content.size();
    // lstrip / rstrip: the token absorbs the white space beside it.
    if (found->lstrip) {
      while (segment_end > segment_start && (text[segment_end - 1] == ' ' || text[segment_end - 1] == '\t' ||
                                             text[segment_end - 1] == '\n' || text[segment_end - 1] == '\r')) {
        --segment_end;
      }
    }
    if (found->rstrip) {
      while (token_end < text.size() && (text[token_end] == ' ' || text[token_end] == '\t' || text[token_end] == '\n' ||
                                         text[token_end] == '\r')) {
        ++token_end;
      }
    }
    EncodeOrdinary(text.substr(segment_start, segment_end - segment_start), &ids);
    ids.push_back(found->id);
    segment_start = pos = token_end;
  }
  EncodeOrdinary(text.substr(segment_start), &ids);
  return ids;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonText(std::string_view tokenizer_json,
                                                           std::string_view tokenizer_config_json) {
  ENVFORGE_ASSIGN_OR_RETURN(auto impl, Impl::Create(tokenizer_json, tokenizer_config_json));
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code error;
  fs::path json_path = path;
  if (fs::is_directory(json_path, error)) json_path /= "tokenizer.json";
  if (!fs::exists(json_path, error)) return NotFoundError("tokenizer: no file " + json_path.string());
  ENVFORGE_ASSIGN_OR_RETURN(std::string json_text, ReadFileToString(json_path.string()));
  std::string config_text;
  const fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path, error)) {
    ENVFORGE_ASSIGN_OR_RETURN(config_text, ReadFileToString(config_path.string()));
  }
  auto tokenizer = FromJsonText(json_text, config_text);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(json_path.string());
  return tokenizer;
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special) const {
  return impl_->Encode(text, parse_special);
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_bytes.size()) continue;
    if (skip_special && impl_->id_special[id]) continue;
    out += impl_->id_bytes[id];
  }
  return out;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_bytes.size()) return std::string();
  return impl_->id_bytes[id];
}

std::optional<int32_t> Tokenizer::TokenId(std::string_view token_text) const {
  const std::string key(token_text);
  if (auto it = impl_->added_by_content.find(key); it != impl_->added_by_content.end()) return it->second;
  if (auto it = impl_->vocab.find(key); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::IsSpecial(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->id_special.size() && impl_->id_special[id] != 0;
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->id_bytes.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

}  // namespace envforge::inference
