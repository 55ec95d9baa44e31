// The numpy reference forward (tests/inference/reference_model.py): its self-test of the
// invariants of dsa-engine.md section 7, and its CLI output shape on a tiny checkpoint.
#include <doctest/doctest.h>

#include "base/json.h"
#include "tests/inference/loader_test_util.h"

namespace envforge::inference {
namespace {

using testing::Contains;
using testing::TempDir;

TEST_SUITE("inference.reference_model") {
  TEST_CASE("reference_model.py --self-test passes") {
    std::string output = testing::RunPython({"tests/inference/reference_model.py", "--self-test"});
    INFO(output);
    CHECK(Contains(output, "ok   MQA-mode logits equal MHA-mode logits"));
    CHECK(Contains(output, "ok   sparse == dense for 16 tokens <= index_topk"));
    CHECK(Contains(output, "ok   Hadamard preserves q.k"));
    CHECK(Contains(output, "self-test passed"));
  }

  TEST_CASE("reference_model.py writes logits, top-k sets, index scores and a greedy continuation") {
    TempDir dir;
    testing::MakeTinyModel(dir / "m", {"--dtype", "fp8"});
    std::string tokens;
    for (int i = 0; i < 24; ++i) tokens += (i ? "," : "") + std::to_string((i * 37 + 5) % 512);
    testing::RunPython({"tests/inference/reference_model.py", "--model", dir / "m", "--tokens", tokens, "--greedy", "2",
                        "--out", dir / "out.json"});
    Result<std::string> text = ReadFileToString(dir / "out.json");
    REQUIRE(text.ok());
    Result<Json> result = ParseJson(*text);
    REQUIRE(result.ok());
    const Json& json = *result;
    REQUIRE(json["logits"].size() == 24);
    CHECK(json["logits"][0].size() == 512);
    REQUIRE(json["topk"].contains("2"));
    const Json& sets = json["topk"]["2"];
    REQUIRE(sets.size() == 24);
    CHECK(sets[3].size() == 4);    // t + 1 keys below index_topk
    CHECK(sets[23].size() == 16);  // index_topk beyond it
    for (const Json& key : sets[23]) CHECK(key.get<int>() <= 23);
    CHECK(json["index_scores"]["0"][23].size() == 24);
    REQUIRE(json["greedy"].size() == 2);
    CHECK(json["greedy"][0].get<int>() >= 0);
    CHECK(json["greedy"][0].get<int>() < 512);
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
