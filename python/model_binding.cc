// envforge.model_logits over inference::Model::Forward.
#include "python/model_binding.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "inference/model.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace envforge::python {
namespace {

struct Logits {
  std::vector<float> values;  // [tokens, vocab], row-major
  int64_t vocab = 0;
};

Result<Logits> PrefillLogits(const std::string& model_dir, const std::vector<int32_t>& tokens, bool dense) {
  inference::ModelOptions options;
  options.dense_attention = dense;
  options.load_tokenizer = false;
  ENVFORGE_ASSIGN_OR_RETURN(std::unique_ptr<inference::Model> model, inference::Model::Load(model_dir, options));
  std::unique_ptr<inference::KvCache> cache = model->NewCache();
  const inference::SequenceInput input{cache.get(), tokens};
  inference::ForwardOptions forward;
  forward.all_logits = true;
  Logits logits;
  logits.vocab = model->config().vocab_size;
  ENVFORGE_RETURN_IF_ERROR(model->Forward({&input, 1}, &logits.values, forward));
  return logits;
}

py::array_t<float> ModelLogits(const std::string& model_dir, const std::vector<int32_t>& tokens, bool dense) {
  if (tokens.empty()) throw py::value_error("model_logits: tokens is empty (pass at least one token id)");
  Result<Logits> logits = [&] {
    py::gil_scoped_release release;
    return PrefillLogits(model_dir, tokens, dense);
  }();
  if (!logits.ok()) RaiseStatus(logits.status());
  // The array takes the vector's buffer: no copy of a [tokens, vocab] matrix.
  auto* values = new std::vector<float>(std::move(logits->values));
  py::capsule owner(values, [](void* pointer) { delete static_cast<std::vector<float>*>(pointer); });
  const auto rows = static_cast<py::ssize_t>(tokens.size());
  const auto columns = static_cast<py::ssize_t>(logits->vocab);
  return py::array_t<float>({rows, columns}, values->data(), owner);
}

}  // namespace

void DefineModel(py::module_& module) {
  module.def("model_logits", &ModelLogits, py::arg("model_dir"), py::arg("tokens"), py::arg("dense") = false,
             "The engine's logits at every position of one prefill of tokens: float32 [len(tokens), vocab]; "
             "DSA unless dense=True.");
}

}  // namespace envforge::python
