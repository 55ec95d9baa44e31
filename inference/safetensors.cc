// Memory-mapped safetensors files and checkpoints (see safetensors.h).
#include "inference/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/fd.h"
#include "base/json.h"
#include "base/sha256.h"

namespace envforge::inference {
namespace {

namespace fs = std::filesystem;

// Bytes per element of every dtype safetensors defines; 0 for names it does not define. Sizes of
// the unsupported ones are still known so their entries can be validated.
int DTypeNameSize(const std::string& name) {
  static const std::pair<const char*, int> kSizes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1}, {"I64", 8},  {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U64", 8}, {"U32", 4},  {"U16", 2},     {"U8", 1},      {"BOOL", 1},
  };
  for (const auto& [dtype, size] : kSizes) {
    if (name == dtype) return size;
  }
  return 0;
}

bool SupportedDType(const std::string& name, kernels::DType* dtype) {
  for (kernels::DType candidate :
       {kernels::DType::kF32, kernels::DType::kBF16, kernels::DType::kF16, kernels::DType::kF8E4M3}) {
    if (name == kernels::DTypeName(candidate)) {
      *dtype = candidate;
      return true;
    }
  }
  return false;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ",";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// Element count, or -1 on overflow.
int64_t ElementCount(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim != 0 && count > INT64_MAX / dim) return -1;
    count *= dim;
  }
  return count;
}

uint64_t ReadLe64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | bytes[i];
  return value;
}

struct RawEntry {
  std::string name;
  uint64_t begin = 0;
  uint64_t end = 0;
};

}  // namespace

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    return ErrnoError("cannot open " + path, errno);
  }
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) return ErrnoError("cannot stat " + path, errno);
  size_t file_size = static_cast<size_t>(info.st_size);
  if (file_size < 8)
    return DataLossError(path + ": " + std::to_string(file_size) + " bytes, too short for a safetensors header");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  void* map = ::mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) return ErrnoError("cannot mmap " + path, errno);
  file->map_ = map;  // unmapped by the destructor from here on
  file->map_size_ = file_size;
  const uint8_t* base = static_cast<const uint8_t*>(map);

  uint64_t header_size = ReadLe64(base);
  if (header_size > file_size - 8) {
    return DataLossError(path + ": header of " + std::to_string(header_size) + " bytes runs past the end of the " +
                         std::to_string(file_size) + "-byte file (truncated?)");
  }
  std::string_view header_text(reinterpret_cast<const char*>(base + 8), header_size);
  Result<Json> header = ParseJson(header_text, path + " header");
  if (!header.ok()) return DataLossError(header.status().message());
  if (!header->is_object()) return DataLossError(path + ": header is not a JSON object");

  const uint64_t data_start = 8 + header_size;
  const uint64_t data_size = file_size - data_start;
  std::vector<RawEntry> entries;
  for (const auto& [name, entry] : header->items()) {
    if (name == "__metadata__") continue;
    std::string where = path + ": tensor '" + name + "': ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() || !entry.contains("shape") ||
        !entry["shape"].is_array() || !entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2) {
      return DataLossError(where + "malformed header entry " + DumpJson(entry));
    }
    TensorInfo tensor;
    tensor.name = name;
    tensor.file = path;
    tensor.dtype_name = entry["dtype"].get<std::string>();
    tensor.dtype_supported = SupportedDType(tensor.dtype_name, &tensor.dtype);
    for (const Json& dim : entry["shape"]) {
      if (!dim.is_number_unsigned()) return DataLossError(where + "bad shape " + DumpJson(entry["shape"]));
      tensor.shape.push_back(dim.get<int64_t>());
    }
    const Json& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return DataLossError(where + "bad data_offsets " + DumpJson(offsets));
    }
    RawEntry raw{name, offsets[0].get<uint64_t>(), offsets[1].get<uint64_t>()};
    if (raw.end < raw.begin) return DataLossError(where + "data_offsets end before begin");
    tensor.nbytes = raw.end - raw.begin;
    int element_size = DTypeNameSize(tensor.dtype_name);
    int64_t elements = ElementCount(tensor.shape);
    if (element_size > 0 && (elements < 0 || static_cast<uint64_t>(elements) * element_size != tensor.nbytes)) {
      return DataLossError(where + "shape " + ShapeString(tensor.shape) + " of " + tensor.dtype_name + " needs " +
                           std::to_string(elements * element_size) + " bytes but data_offsets span " +
                           std::to_string(tensor.nbytes));
    }
    entries.push_back(raw);
    file->tensors_.emplace(name, std::move(tensor));
  }

  // In file order: the first tensor past the end names the truncation; neighbours must not overlap.
  std::sort(entries.begin(), entries.end(), [](const RawEntry& a, const RawEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    const RawEntry& entry = entries[i];
    if (entry.end > data_size) {
      return DataLossError(path + ": tensor '" + entry.name + "' runs past the end of the file (data ends at byte " +
                           std::to_string(data_start + entry.end) + ", file has " + std::to_string(file_size) +
                           "; truncated?)");
    }
    if (i > 0 && entry.begin < entries[i - 1].end) {
      return DataLossError(path + ": tensors '" + entries[i - 1].name + "' and '" + entry.name + "' overlap");
    }
    file->tensors_.at(entry.name).data = base + data_start + entry.begin;
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const std::map<std::string, TensorInfo>& SafetensorsFile::tensors() const { return tensors_; }

const std::string& SafetensorsFile::path() const { return path_; }
std::string_view SafetensorsFile::bytes() const { return {static_cast<const char*>(map_), map_size_}; }

Result<std::unique_ptr<Checkpoint>> Checkpoint::Open(const std::string& dir) {
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) {  // a single .safetensors file named directly
    ENVFORGE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(dir));
    checkpoint->files_.push_back(std::move(file));
  } else {
    fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
    fs::path single_path = fs::path(dir) / "model.safetensors";
    if (fs::exists(index_path, ec)) {
      ENVFORGE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path.string()));
      Result<Json> index = ParseJson(text, index_path.string());
      if (!index.ok()) return DataLossError(index.status().message());
      if (!index->is_object() || !index->contains("weight_map") || !(*index)["weight_map"].is_object()) {
        return DataLossError(index_path.string() + ": no \"weight_map\" object");
      }
      const Json& weight_map = (*index)["weight_map"];
      std::vector<std::string> shard_names;
      for (const auto& [name, shard] : weight_map.items()) {
        if (!shard.is_string() || shard.get<std::string>().find('/') != std::string::npos) {
          return DataLossError(index_path.string() + ": tensor '" + name + "': bad shard name " + DumpJson(shard));
        }
        if (std::find(shard_names.begin(), shard_names.end(), shard.get<std::string>()) == shard_names.end()) {
          shard_names.push_back(shard.get<std::string>());
        }
      }
      std::sort(shard_names.begin(), shard_names.end());
      std::map<std::string, const SafetensorsFile*> shard_by_name;
      for (const std::string& shard : shard_names) {
        ENVFORGE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open((fs::path(dir) / shard).string()));
        shard_by_name[shard] = file.get();
        checkpoint->files_.push_back(std::move(file));
      }
      for (const auto& [name, shard] : weight_map.items()) {
        if (shard_by_name.at(shard.get<std::string>())->Find(name) == nullptr) {
          return DataLossError(index_path.string() + ": tensor '" + name + "' is mapped to shard '" +
                               shard.get<std::string>() + "', which does not contain it");
        }
      }
    } else if (fs::exists(single_path, ec)) {
      ENVFORGE_ASSIGN_OR_RETURN(auto file, SafetensorsFile::Open(single_path.string()));
      checkpoint->files_.push_back(std::move(file));
    } else {
      return NotFoundError(dir + ": no model.safetensors or model.safetensors.index.json");
    }
  }
  for (const auto& file : checkpoint->files_) {
    for (const auto& [name, tensor] : file->tensors()) {
      auto [it, inserted] = checkpoint->index_.emplace(name, &tensor);
      if (!inserted) {
        return DataLossError("tensor '" + name + "' appears in both " + it->second->file + " and " + file->path());
      }
    }
  }
  return checkpoint;
}

std::string Checkpoint::ContentSha256() const {
  Sha256 hash;
  for (const auto& file : files_) {
    hash.UpdateField(fs::path(file->path()).filename().string());
    hash.Update(file->bytes());
  }
  return hash.FinishHex();
}

const TensorInfo* Checkpoint::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

Result<const TensorInfo*> Checkpoint::Require(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo* tensor = Find(name);
  if (tensor == nullptr) return NotFoundError("tensor '" + name + "' is missing");
  if (!tensor->dtype_supported) {
    return InvalidArgumentError("tensor '" + name + "': unsupported dtype " + tensor->dtype_name);
  }
  if (tensor->shape != shape) {
    return InvalidArgumentError("tensor '" + name + "': shape " + ShapeString(tensor->shape) + ", expected " +
                                ShapeString(shape));
  }
  return tensor;
}

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(index_.size());
  for (const auto& [name, tensor] : index_) names.push_back(name);
  return names;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, tensor] : index_) total += tensor->nbytes;
  return total;
}

Status WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  Json header = Json::object();
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const TensorToWrite& tensor : tensors) {
    std::string where = path + ": tensor '" + tensor.name + "': ";
    if (tensor.name == "__metadata__" || !seen.insert(tensor.name).second) {
      return InvalidArgumentError(where + "duplicate or reserved name");
    }
    int element_size = DTypeNameSize(tensor.dtype_name);
    if (element_size == 0) return InvalidArgumentError(where + "unknown dtype " + tensor.dtype_name);
    int64_t elements = ElementCount(tensor.shape);
    if (elements < 0 || static_cast<uint64_t>(elements) * element_size != tensor.bytes.size()) {
      return InvalidArgumentError(where + "shape " + ShapeString(tensor.shape) + " of " + tensor.dtype_name +
                                  " needs " + std::to_string(elements * element_size) + " bytes, got " +
                                  std::to_string(tensor.bytes.size()));
    }
    header[tensor.name] = {{"dtype", tensor.dtype_name},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  std::string header_text = DumpJson(header);
  // Pad with spaces so the data starts 8-byte aligned, as the reference writer does.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  std::string contents;
  contents.reserve(8 + header_text.size() + offset);
  uint64_t header_size = header_text.size();
  for (int i = 0; i < 8; ++i) contents.push_back(static_cast<char>(header_size >> (8 * i) & 0xff));
  contents += header_text;
  for (const TensorToWrite& tensor : tensors) contents += tensor.bytes;
  return WriteFileAtomically(path, contents);
}

}  // namespace envforge::inference
