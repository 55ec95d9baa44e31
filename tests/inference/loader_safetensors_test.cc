// safetensors files and checkpoints: round trips through WriteSafetensors, header validation
// (truncation, overlaps, size mismatches, unsupported dtypes) and sharded checkpoints.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>

#include "base/fd.h"
#include "base/json.h"
#include "base/sha256.h"
#include "inference/safetensors.h"
#include "tests/inference/loader_test_util.h"

namespace envforge::inference {
namespace {

using testing::Contains;
using testing::TempDir;
namespace fs = std::filesystem;

std::string FloatBytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// A file with the given raw header text followed by `data`.
void WriteRawSafetensors(const std::string& path, const std::string& header, const std::string& data) {
  std::string contents;
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i) contents.push_back(static_cast<char>(size >> (8 * i) & 0xff));
  contents += header + data;
  REQUIRE(WriteFileAtomically(path, contents).ok());
}

void CheckError(const Status& status, StatusCode code, const std::string& part) {
  REQUIRE_FALSE(status.ok());
  CHECK(status.code() == code);
  CHECK_MESSAGE(Contains(status.message(), part), status.message());
}

template <typename T>
void CheckError(const Result<T>& result, StatusCode code, const std::string& part) {
  CheckError(result.status(), code, part);
}

TEST_SUITE("inference.safetensors") {
  TEST_CASE("tensors written by WriteSafetensors read back with their dtype, shape and bytes") {
    TempDir dir;
    std::vector<TensorToWrite> tensors = {
        {"a", "F32", {2, 3}, FloatBytes({1, 2, 3, 4, 5, 6})},
        {"b.bias", "BF16", {2}, std::string("\x80\x3f\x00\x40", 4)},  // 1.0, 2.0
        {"c", "F8_E4M3", {3}, std::string("\x38\x40\xb8", 3)},        // 1, 2, -1
        {"d", "F32", {1}, FloatBytes({7})},                           // after an odd-sized tensor
    };
    REQUIRE(WriteSafetensors(dir / "model.safetensors", tensors).ok());
    Result<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path().string());
    REQUIRE(checkpoint.ok());
    CHECK((*checkpoint)->TensorNames() == std::vector<std::string>{"a", "b.bias", "c", "d"});
    CHECK((*checkpoint)->total_bytes() == 24 + 4 + 3 + 4);
    const TensorInfo* a = (*checkpoint)->Find("a");
    REQUIRE(a != nullptr);
    CHECK(a->dtype == kernels::DType::kF32);
    CHECK(a->shape == std::vector<int64_t>{2, 3});
    float a5;
    std::memcpy(&a5, a->data + 5 * 4, 4);
    CHECK(a5 == 6.0f);
    const TensorInfo* b = (*checkpoint)->Find("b.bias");
    CHECK(b->dtype == kernels::DType::kBF16);
    uint16_t b1;
    std::memcpy(&b1, b->data + 2, 2);
    CHECK(kernels::Bf16ToFloat(b1) == 2.0f);
    const TensorInfo* c = (*checkpoint)->Find("c");
    CHECK(c->dtype == kernels::DType::kF8E4M3);
    CHECK(kernels::Fp8E4M3ToFloat(c->data[2]) == -1.0f);
    float d0;
    std::memcpy(&d0, (*checkpoint)->Find("d")->data, 4);
    CHECK(d0 == 7.0f);
    CHECK((*checkpoint)->Find("missing") == nullptr);

    // A single file can be named directly.
    Result<std::unique_ptr<Checkpoint>> direct = Checkpoint::Open(dir / "model.safetensors");
    REQUIRE(direct.ok());
    CHECK((*direct)->TensorNames().size() == 4);
  }

  TEST_CASE("Require checks presence, dtype support and shape, naming the tensor") {
    TempDir dir;
    REQUIRE(WriteSafetensors(dir / "model.safetensors", {{"w", "F32", {2, 2}, FloatBytes({1, 2, 3, 4})},
                                                         {"ids", "I64", {2}, std::string(16, '\0')}})
                .ok());
    Result<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path().string());
    REQUIRE(checkpoint.ok());  // an unsupported dtype is only an error when the tensor is used
    CHECK((*checkpoint)->Require("w", {2, 2}).ok());
    CheckError((*checkpoint)->Require("w", {4}), StatusCode::kInvalidArgument, "tensor 'w': shape [2,2], expected [4]");
    CheckError((*checkpoint)->Require("nope", {1}), StatusCode::kNotFound, "tensor 'nope' is missing");
    CheckError((*checkpoint)->Require("ids", {2}), StatusCode::kInvalidArgument, "tensor 'ids': unsupported dtype I64");
  }

  TEST_CASE("a truncated file is DataLoss naming the first tensor past the end") {
    TempDir dir;
    std::string path = dir / "model.safetensors";
    REQUIRE(WriteSafetensors(path, {{"first", "F32", {4}, FloatBytes({1, 2, 3, 4})},
                                    {"second", "F32", {4}, FloatBytes({1, 2, 3, 4})},
                                    {"third", "F32", {4}, FloatBytes({1, 2, 3, 4})}})
                .ok());
    fs::resize_file(path, fs::file_size(path) - 20);
    CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "tensor 'second' runs past the end");
    CheckError(Checkpoint::Open(dir.path().string()), StatusCode::kDataLoss, "'second'");

    fs::resize_file(path, 5);
    CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "too short");
    WriteRawSafetensors(path, "{}", "");
    fs::resize_file(path, 9);  // the header claims 2 bytes, 1 is left
    CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "runs past the end");
  }

  TEST_CASE("malformed headers are DataLoss naming the tensor") {
    TempDir dir;
    std::string path = dir / "bad.safetensors";
    std::string data(64, '\0');
    SUBCASE("shape and dtype size disagree with the offsets") {
      WriteRawSafetensors(path, R"({"w":{"dtype":"F32","shape":[3,4],"data_offsets":[0,40]}})", data);
      CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "tensor 'w': shape [3,4] of F32 needs 48 bytes");
    }
    SUBCASE("overlapping tensors") {
      WriteRawSafetensors(path,
                          R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                          R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                          data);
      CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "'a' and 'b' overlap");
    }
    SUBCASE("not JSON") {
      WriteRawSafetensors(path, "{not json", data);
      CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "bad.safetensors header");
    }
    SUBCASE("an entry without offsets") {
      WriteRawSafetensors(path, R"({"w":{"dtype":"F32","shape":[4]}})", data);
      CheckError(SafetensorsFile::Open(path), StatusCode::kDataLoss, "tensor 'w': malformed");
    }
    SUBCASE("a dtype safetensors does not define is accepted until used") {
      WriteRawSafetensors(path, R"({"w":{"dtype":"Q4","shape":[4],"data_offsets":[0,2]},"__metadata__":{"k":"v"}})",
                          data);
      Result<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
      REQUIRE(file.ok());
      CHECK_FALSE((*file)->Find("w")->dtype_supported);
      CHECK((*file)->Find("__metadata__") == nullptr);
    }
  }

  TEST_CASE("WriteSafetensors rejects sizes that do not match the shape and duplicate names") {
    TempDir dir;
    CheckError(WriteSafetensors(dir / "x.safetensors", {{"w", "F32", {3}, FloatBytes({1, 2})}}),
               StatusCode::kInvalidArgument, "tensor 'w': shape [3] of F32 needs 12 bytes, got 8");
    CheckError(WriteSafetensors(dir / "x.safetensors",
                                {{"w", "F32", {1}, FloatBytes({1})}, {"w", "F32", {1}, FloatBytes({1})}}),
               StatusCode::kInvalidArgument, "duplicate");
    CHECK_FALSE(fs::exists(dir / "x.safetensors"));
  }

  TEST_CASE("a sharded checkpoint opens every shard of the index") {
    TempDir dir;
    REQUIRE(WriteSafetensors(dir / "s1.safetensors", {{"a", "F32", {1}, FloatBytes({1})}}).ok());
    REQUIRE(WriteSafetensors(dir / "s2.safetensors", {{"b", "F32", {1}, FloatBytes({2})}}).ok());
    Json index = {{"metadata", {{"total_size", 8}}},
                  {"weight_map", {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}}}};
    REQUIRE(WriteFileAtomically(dir / "model.safetensors.index.json", index.dump()).ok());
    Result<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(dir.path().string());
    REQUIRE(checkpoint.ok());
    CHECK((*checkpoint)->TensorNames() == std::vector<std::string>{"a", "b"});
    CHECK(Contains((*checkpoint)->Find("b")->file, "s2.safetensors"));

    SUBCASE("a tensor its shard lacks") {
      index["weight_map"]["c"] = "s2.safetensors";
      REQUIRE(WriteFileAtomically(dir / "model.safetensors.index.json", index.dump()).ok());
      CheckError(Checkpoint::Open(dir.path().string()), StatusCode::kDataLoss,
                 "tensor 'c' is mapped to shard 's2.safetensors'");
    }
    SUBCASE("a missing shard") {
      index["weight_map"]["c"] = "s3.safetensors";
      REQUIRE(WriteFileAtomically(dir / "model.safetensors.index.json", index.dump()).ok());
      CheckError(Checkpoint::Open(dir.path().string()), StatusCode::kNotFound, "s3.safetensors");
    }
    SUBCASE("a tensor in two shards") {
      REQUIRE(WriteSafetensors(dir / "s2.safetensors",
                               {{"b", "F32", {1}, FloatBytes({2})}, {"a", "F32", {1}, FloatBytes({3})}})
                  .ok());
      CheckError(Checkpoint::Open(dir.path().string()), StatusCode::kDataLoss, "tensor 'a' appears in both");
    }
  }

  // The documented formula, written out: per file, its name's length (8 bytes, little-endian), its name, its bytes.
  std::string ContentHashInput(const fs::path& dir, const std::vector<std::string>& files) {
    std::string input;
    for (const std::string& name : files) {
      for (int i = 0; i < 8; ++i) input.push_back(static_cast<char>(name.size() >> (8 * i) & 0xff));
      Result<std::string> bytes = ReadFileToString((dir / name).string());
      REQUIRE(bytes.ok());
      input += name + *bytes;
    }
    return input;
  }

  TEST_CASE("ContentSha256 names the weights: the same bytes anywhere, another hash when one weight changes") {
    TempDir first, second;
    REQUIRE(WriteSafetensors(first / "model.safetensors", {{"w", "F32", {2}, FloatBytes({1, 2})}}).ok());
    REQUIRE(WriteSafetensors(second / "model.safetensors", {{"w", "F32", {2}, FloatBytes({1, 2})}}).ok());
    auto a = Checkpoint::Open(first.path().string());
    auto b = Checkpoint::Open(second.path().string());
    REQUIRE((a.ok() && b.ok()));
    const std::string hash = (*a)->ContentSha256();
    CHECK(hash == Sha256Hex(ContentHashInput(first.path(), {"model.safetensors"})));
    CHECK(hash == (*b)->ContentSha256());

    REQUIRE(WriteSafetensors(second / "model.safetensors", {{"w", "F32", {2}, FloatBytes({1, 2.5f})}}).ok());
    auto changed = Checkpoint::Open(second.path().string());
    REQUIRE(changed.ok());
    CHECK((*changed)->ContentSha256() != hash);

    SUBCASE("a sharded checkpoint hashes every shard in name order") {
      TempDir dir;
      REQUIRE(WriteSafetensors(dir / "s2.safetensors", {{"b", "F32", {1}, FloatBytes({2})}}).ok());
      REQUIRE(WriteSafetensors(dir / "s1.safetensors", {{"a", "F32", {1}, FloatBytes({1})}}).ok());
      Json index = {{"weight_map", {{"b", "s2.safetensors"}, {"a", "s1.safetensors"}}}};
      REQUIRE(WriteFileAtomically(dir / "model.safetensors.index.json", index.dump()).ok());
      auto sharded = Checkpoint::Open(dir.path().string());
      REQUIRE(sharded.ok());
      CHECK((*sharded)->ContentSha256() ==
            Sha256Hex(ContentHashInput(dir.path(), {"s1.safetensors", "s2.safetensors"})));
    }
  }

  TEST_CASE("a directory without a checkpoint is NotFound") {
    TempDir dir;
    CheckError(Checkpoint::Open(dir.path().string()), StatusCode::kNotFound, "no model.safetensors");
  }

}  // TEST_SUITE

}  // namespace
}  // namespace envforge::inference
