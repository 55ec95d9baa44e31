// Memory-mapped safetensors checkpoints (single file or sharded with an index).
//
// Format: 8-byte little-endian header length N, N bytes of JSON {"<name>": {"dtype", "shape",
// "data_offsets": [begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to
// the end of the header. Supported dtypes: F32, BF16, F16, F8_E4M3 (others are rejected when the
// tensor is used, naming it: "tensor 'x': unsupported dtype I64"). Open checks the header: JSON,
// every entry's shape * dtype size == end - begin, offsets within the file (a truncated file is
// DataLoss naming the first tensor that runs past the end), no overlaps.
//
// Checkpoint::Open(dir) opens dir/model.safetensors, or every shard listed in
// dir/model.safetensors.index.json ("weight_map": {tensor: file}); a tensor the index names but
// its shard lacks is DataLoss naming both. The mappings live as long as the Checkpoint.
// Thread safety: immutable after Open.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "kernels/cpu/float_formats.h"

namespace envforge::inference {

struct TensorInfo {
  std::string name;
  std::string dtype_name;  // as written in the header ("BF16", "I64", ...)
  bool dtype_supported = false;
  kernels::DType dtype = kernels::DType::kF32;  // valid when dtype_supported
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  std::string file;  // the shard it lives in
};

class SafetensorsFile {
 public:
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  const TensorInfo* Find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, TensorInfo>& tensors() const;
  const std::string& path() const;
  std::string_view bytes() const;  // the whole mapped file

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

class Checkpoint {
 public:
  static Result<std::unique_ptr<Checkpoint>> Open(const std::string& dir);
  const TensorInfo* Find(const std::string& name) const;
  // The tensor with the expected dtype(s) and shape, else NotFound ("tensor 'x' is missing") or
  // InvalidArgument ("tensor 'x': shape [a,b], expected [c,d]" / "dtype F16, expected BF16|F32").
  Result<const TensorInfo*> Require(const std::string& name, const std::vector<int64_t>& shape) const;
  std::vector<std::string> TensorNames() const;
  size_t total_bytes() const;
  // Which weights a recorded run played, whatever the directory is called: SHA-256 over, per file
  // of the checkpoint in shard-name order, its base name's length (8 bytes, little-endian), its
  // base name and its bytes. Reads the whole mapping: a pass over the checkpoint (tens of ms for
  // a 15 MB model).
  std::string ContentSha256() const;

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorInfo*> index_;
};

// Writes a safetensors file (tests and tools; the tiny-model generator is Python). Tensors are
// written in the given order, atomically (temp file + rename).
struct TensorToWrite {
  std::string name;
  std::string dtype_name;
  std::vector<int64_t> shape;
  std::string bytes;
};
Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors);

}  // namespace envforge::inference
