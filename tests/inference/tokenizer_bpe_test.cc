// The byte-level BPE tokenizer on the committed tiny tokenizer (tests/fixtures/tokenizer/tiny,
// made by scripts/make_tiny_tokenizer.py) and on small hand-written tokenizer.json texts.
//
// Expected ids come from the script's own Python reference encoder
// (`python3 scripts/make_tiny_tokenizer.py --encode TEXT`), an implementation independent of the
// C++ one; the small hand-written vocabularies below are checked by hand.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/fd.h"
#include "base/json.h"
#include "base/subprocess.h"
#include "inference/tokenizer.h"

namespace envforge::inference {
namespace {

namespace fs = std::filesystem;

const std::string kSourceDir = ENVFORGE_TEST_SOURCE_DIR;
const std::string kFixtureDir = kSourceDir + "/tests/fixtures/tokenizer/tiny";

bool Contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

const Tokenizer& Tiny() {
  static const std::unique_ptr<Tokenizer> tokenizer = [] {
    auto loaded = Tokenizer::Load(kFixtureDir);
    REQUIRE_MESSAGE(loaded.ok(), loaded.status().ToString());
    return std::move(loaded).value();
  }();
  return *tokenizer;
}

using Ids = std::vector<int32_t>;

// A tokenizer.json with a byte-level vocabulary of the given tokens (ids in order) and merges.
std::string MiniTokenizerJson(const std::vector<std::string>& tokens, const Json& merges,
                              const Json& added_tokens = Json::array()) {
  Json vocab = Json::object();
  for (size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = static_cast<int>(i);
  Json root = {
      {"added_tokens", added_tokens},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
  };
  return root.dump();
}

void CheckRejected(const std::string& json, const std::string& field) {
  auto tokenizer = Tokenizer::FromJsonText(json);
  REQUIRE_FALSE(tokenizer.ok());
  CHECK(tokenizer.status().code() == StatusCode::kInvalidArgument);
  CHECK_MESSAGE(Contains(tokenizer.status().message(), field), tokenizer.status().message());
}

TEST_SUITE("inference.tokenizer") {
  TEST_CASE("the committed tiny tokenizer is what the script generates") {
    const fs::path out = fs::temp_directory_path() / ("tiny_tokenizer_" + std::to_string(::getpid()));
    auto run = RunCommand({"/usr/bin/python3", kSourceDir + "/scripts/make_tiny_tokenizer.py", "--out", out.string()});
    REQUIRE(run.ok());
    REQUIRE_MESSAGE(run->exit_code == 0, run->stderr_text);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
      auto generated = ReadFileToString((out / name).string());
      auto committed = ReadFileToString(kFixtureDir + "/" + name);
      REQUIRE(generated.ok());
      REQUIRE(committed.ok());
      CHECK_MESSAGE(*generated == *committed, name);
    }
    fs::remove_all(out);
  }

  TEST_CASE("tiny tokenizer: ids, special tokens, bos and eos") {
    const Tokenizer& tok = Tiny();
    CHECK(tok.vocab_size() == 1024);
    CHECK(tok.bos_id() == 0);
    CHECK(tok.eos_id() == 1);
    CHECK(tok.TokenId("<｜User｜>") == 1020);
    CHECK(tok.TokenId("<｜Assistant｜>") == 1021);
    CHECK(tok.TokenId("<think>") == 1022);
    CHECK(tok.TokenId("</think>") == 1023);
    CHECK(tok.TokenId("a") == 2 + 'a');  // byte b has id 2 + b
    CHECK(tok.TokenId("Ġ") == 2 + ' ');  // the space byte's alphabet character
    CHECK_FALSE(tok.TokenId("no such token").has_value());
    CHECK(tok.IsSpecial(0));
    CHECK(tok.IsSpecial(1020));
    CHECK_FALSE(tok.IsSpecial(1022));  // <think> is an ordinary added token
    CHECK_FALSE(tok.IsSpecial(2 + 'a'));
    CHECK(tok.TokenBytes(2 + ' ') == " ");
    CHECK(tok.TokenBytes(2 + 0xFF) == "\xff");
    CHECK(tok.TokenBytes(1020) == "<｜User｜>");
    CHECK(tok.TokenBytes(5000).empty());
  }

  TEST_CASE("tiny tokenizer: ids match the Python reference encoder") {
    const Tokenizer& tok = Tiny();
    CHECK(tok.Encode("The quick brown fox jumps over the lazy dog.") ==
          Ids{313, 997, 340, 875, 320, 840, 991, 300, 318, 264, 567, 431, 48});
    CHECK(tok.Encode("Numbers: 1234567 and 3.14159") == Ids{701, 60, 34, 644, 650, 57, 286, 34, 53, 48, 645, 651});
    CHECK(tok.Encode("We're testing, aren't we?") == Ids{713, 604, 388, 326, 46, 562, 112, 41, 118, 267, 103, 65});
    CHECK(tok.Encode("中文分词 and 日本語のテキスト") == Ids{961, 286, 34, 963});
    CHECK(tok.Encode("line one\n\n  indented\tTab") ==
          Ids{110, 265, 103, 34, 380, 363, 34, 309, 102, 325, 103, 102, 11, 86, 736});
    CHECK(tok.Encode("Café naïve 🙂") == Ids{677, 281, 756, 1011});
    CHECK(tok.Encode("").empty());
  }

  TEST_CASE("tiny tokenizer: a hand-checked merge sequence") {
    const Tokenizer& tok = Tiny();
    // " the" is one pre-token; merge 0 is "Ġ t" and merge 1 is "h e", then "Ġt he" (rank 6).
    const std::vector<int32_t> ids = tok.Encode(" the");
    REQUIRE(ids.size() == 1);
    CHECK(tok.TokenBytes(ids[0]) == " the");
    CHECK(ids[0] == 258 + 6);
    // "x" alone has no merge: its byte id.
    CHECK(tok.Encode("x") == Ids{2 + 'x'});
  }

  TEST_CASE("tiny tokenizer: special tokens are recognised only with parse_special") {
    const Tokenizer& tok = Tiny();
    const std::string text = "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>ok</think>";
    const Ids with = tok.Encode(text, /*parse_special=*/true);
    REQUIRE(with.size() >= 6);
    CHECK(with[0] == 0);
    CHECK(with[1] == 1020);
    CHECK(with[with.size() - 1] == 1023);
    CHECK(tok.Decode(with) == text);
    CHECK(tok.Decode(with, /*skip_special=*/true) == "hi<think>ok</think>");

    const Ids without = tok.Encode(text, /*parse_special=*/false);
    for (int32_t id : without) CHECK(id < 1020);
    CHECK(without[0] != 0);
    CHECK(tok.Decode(without) == text);
    // Text around a special token is encoded on its own, as if the token were a boundary.
    const Ids around = tok.Encode("ab<｜User｜>cd");
    Ids expected = tok.Encode("ab");
    expected.push_back(1020);
    for (int32_t id : tok.Encode("cd")) expected.push_back(id);
    CHECK(around == expected);
  }

  TEST_CASE("tiny tokenizer: round trip on random bytes") {
    const Tokenizer& tok = Tiny();
    std::mt19937 rng(1234);
    for (int round = 0; round < 300; ++round) {
      std::string text(std::uniform_int_distribution<int>(0, 64)(rng), '\0');
      for (char& c : text) c = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
      const Ids ids = tok.Encode(text, false);
      REQUIRE(tok.Decode(ids) == text);
      for (int32_t id : ids) REQUIRE((id >= 2 && id < 1020));
    }
  }

  TEST_CASE("tiny tokenizer: round trip on UTF-8 text") {
    const Tokenizer& tok = Tiny();
    const std::vector<std::string> alphabet = {
        "a",      "Z", " ",       "  ",         "\n",   "\r\n",       "\t",     "0",    "7",  "'",
        "'s",     ".", "!!",      "(",          "<",    "<｜User｜>", "中",     "文",   "の", "テ",
        "한",     "é", "e\u0301", "\u0308",     "🙂", "👍🏽",   "\u200d", "Ω",    "ß",  "\u00a0",
        "\u3000", "$", "€",       "{\"k\": 1}", "\\",   "｜DSML｜",   "\x7f",   "\x01",
    };
    std::mt19937 rng(99);
    for (int round = 0; round < 300; ++round) {
      std::string text;
      const int parts = std::uniform_int_distribution<int>(0, 20)(rng);
      for (int i = 0; i < parts; ++i) {
        text += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
      }
      REQUIRE(tok.Decode(tok.Encode(text, true)) == text);
      REQUIRE(tok.Decode(tok.Encode(text, false)) == text);
    }
    // Invalid UTF-8 mixed with text.
    const std::string broken = "ok \xe4\xb8 half \xf0\x9f\x99 \xc0\xaf overlong \xed\xa0\x80 surrogate";
    CHECK(tok.Decode(tok.Encode(broken)) == broken);
  }

  TEST_CASE("tiny tokenizer: concurrent encoding gives the same ids") {
    const Tokenizer& tok = Tiny();
    const std::string text = "The agent calls a tool, reads the result, and calls another tool. 12345 中文";
    const Ids expected = tok.Encode(text);
    std::vector<Ids> results(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 50; ++i) results[t] = tok.Encode(text + std::to_string(i % 3));
        results[t] = tok.Encode(text);
      });
    }
    for (auto& thread : threads) thread.join();
    for (const Ids& ids : results) CHECK(ids == expected);
  }

  TEST_CASE("merges as [left, right] pairs equal merges as strings") {
    // Bytes 'a' 'b' 'c' and the merges a+b, ab+c: "abc" is one token, "cab" is c + ab.
    const std::vector<std::string> tokens = {"a", "b", "c", "ab", "abc", "Ġ"};
    const std::string as_strings = MiniTokenizerJson(tokens, Json::array({"a b", "ab c"}));
    const std::string as_pairs = MiniTokenizerJson(tokens, Json::parse(R"([["a", "b"], ["ab", "c"]])"));
    for (const std::string& json : {as_strings, as_pairs}) {
      auto tok = Tokenizer::FromJsonText(json);
      REQUIRE_MESSAGE(tok.ok(), tok.status().ToString());
      CHECK((*tok)->Encode("abc") == Ids{4});
      CHECK((*tok)->Encode("cab") == Ids{2, 3});
      CHECK((*tok)->Encode("abc cab") == Ids{4, 5, 2, 3});
      CHECK((*tok)->vocab_size() == 6);
      CHECK_FALSE((*tok)->bos_id().has_value());
    }
  }

  TEST_CASE("merge ranks decide, not position") {
    // b+c has a lower rank than a+b, so "abc" becomes a + bc.
    const std::vector<std::string> tokens = {"a", "b", "c", "ab", "bc"};
    auto tok = Tokenizer::FromJsonText(MiniTokenizerJson(tokens, Json::array({"b c", "a b"})));
    REQUIRE(tok.ok());
    CHECK((*tok)->Encode("abc") == Ids{0, 4});
    CHECK((*tok)->Encode("abab") == Ids{3, 3});
    // Bytes missing from the vocabulary are dropped (no unk token).
    CHECK((*tok)->Encode("axc") == Ids{0, 2});
  }

  TEST_CASE("added tokens: longest match first; bos and eos from tokenizer_config.json") {
    const std::vector<std::string> tokens = {"a", "b", "<", ">", "x"};
    Json added = Json::array({
        {{"id", 5}, {"content", "<x>"}, {"special", true}},
        {{"id", 6}, {"content", "<x><x>"}, {"special", false}},
    });
    const std::string json = MiniTokenizerJson(tokens, Json::array(), added);
    auto tok = Tokenizer::FromJsonText(json, R"({"bos_token": {"content": "<x>"}, "eos_token": "<x><x>"})");
    REQUIRE_MESSAGE(tok.ok(), tok.status().ToString());
    CHECK((*tok)->Encode("a<x><x><x>b") == Ids{0, 6, 5, 1});
    CHECK((*tok)->bos_id() == 5);
    CHECK((*tok)->eos_id() == 6);
    CHECK((*tok)->vocab_size() == 7);
    auto missing = Tokenizer::FromJsonText(json, R"({"bos_token": "<nope>"})");
    REQUIRE_FALSE(missing.ok());
    CHECK(Contains(missing.status().message(), "bos_token"));
  }

  TEST_CASE("bad tokenizer.json is InvalidArgument naming the field") {
    const std::vector<std::string> tokens = {"a", "b", "ab"};
    CheckRejected("{\"pre_tokenizer\": null}", "model: missing");
    CheckRejected("not json", "tokenizer.json");
    Json root = Json::parse(MiniTokenizerJson(tokens, Json::array({"a b"})));

    Json unknown_type = root;
    unknown_type["model"]["type"] = "WordPiece";
    CheckRejected(unknown_type.dump(), "model.type");

    Json no_vocab = root;
    no_vocab["model"].erase("vocab");
    CheckRejected(no_vocab.dump(), "model.vocab");

    Json bad_merge_text = root;
    bad_merge_text["model"]["merges"] = Json::array({"a b", "ab"});
    CheckRejected(bad_merge_text.dump(), "model.merges[1]");

    Json merge_not_in_vocab = root;
    merge_not_in_vocab["model"]["merges"] = Json::array({"b a"});
    CheckRejected(merge_not_in_vocab.dump(), "model.merges[0]");

    Json merge_wrong_shape = root;
    merge_wrong_shape["model"]["merges"] = Json::parse(R"([["a", "b", "c"]])");
    CheckRejected(merge_wrong_shape.dump(), "model.merges[0]");

    Json no_merges = root;
    no_merges["model"].erase("merges");
    CheckRejected(no_merges.dump(), "model.merges");

    Json byte_fallback = root;
    byte_fallback["model"]["byte_fallback"] = true;
    CheckRejected(byte_fallback.dump(), "model.byte_fallback");

    Json normalizer = root;
    normalizer["normalizer"] = {{"type", "NFKC"}};
    CheckRejected(normalizer.dump(), "normalizer.type");

    Json decoder = root;
    decoder["decoder"] = {{"type", "WordPiece"}};
    CheckRejected(decoder.dump(), "decoder.type");

    Json no_byte_level = root;
    no_byte_level["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}};
    CheckRejected(no_byte_level.dump(), "ByteLevel");

    Json bad_added = root;
    bad_added["added_tokens"] = Json::parse(R"([{"id": -1, "content": "<x>"}])");
    CheckRejected(bad_added.dump(), "added_tokens[0].id");
  }

  TEST_CASE("the real DeepSeek-V3.2 tokenizer reproduces the README ids (when ENVFORGE_DEEPSEEK_TOKENIZER is set)") {
    const char* dir = std::getenv("ENVFORGE_DEEPSEEK_TOKENIZER");
    if (dir == nullptr) {
      MESSAGE("ENVFORGE_DEEPSEEK_TOKENIZER not set; skipped");
      return;
    }
    auto tok = Tokenizer::Load(dir);
    REQUIRE_MESSAGE(tok.ok(), tok.status().ToString());
    const std::string text =
        "<｜begin▁of▁sentence｜><｜User｜>hello<｜Assistant｜></think>Hello! I am DeepSeek.<｜end▁of▁sentence｜>"
        "<｜User｜>1+1=?<｜Assistant｜><think>";
    CHECK((*tok)->Encode(text) == Ids{0,    128803, 33310, 128804, 128799, 19923, 3,  342,    1030,   22651, 4374,
                                      1465, 16,     1,     128803, 19,     13,    19, 127252, 128804, 128798});
    CHECK((*tok)->bos_id() == 0);
    CHECK((*tok)->eos_id() == 1);
  }

  TEST_CASE("Load: a directory or a file; a missing path is NotFound") {
    auto by_file = Tokenizer::Load(kFixtureDir + "/tokenizer.json");
    REQUIRE(by_file.ok());
    CHECK((*by_file)->eos_id() == 1);
    auto missing = Tokenizer::Load(kFixtureDir + "/nope");
    REQUIRE_FALSE(missing.ok());
    CHECK(missing.status().code() == StatusCode::kNotFound);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
