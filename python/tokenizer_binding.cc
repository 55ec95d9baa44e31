// envforge.Tokenizer over inference::Tokenizer.
#include "python/tokenizer_binding.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inference/tokenizer.h"
#include "python/status_error.h"

namespace py = pybind11;

namespace envforge::python {

void DefineTokenizer(py::module_& module) {
  using inference::Tokenizer;
  py::class_<Tokenizer>(module, "Tokenizer", "The engine's byte-level BPE tokenizer (a Hugging Face tokenizer.json).")
      .def(py::init([](const std::string& path) {
             Result<std::unique_ptr<Tokenizer>> tokenizer = [&] {
               py::gil_scoped_release release;
               return Tokenizer::Load(path);
             }();
             if (!tokenizer.ok()) RaiseStatus(tokenizer.status());
             return std::move(tokenizer).value();
           }),
           py::arg("path"), "Loads a tokenizer.json, or the one in a directory.")
      .def(
          "encode",
          [](const Tokenizer& tokenizer, const std::string& text, bool parse_special) {
            std::vector<int32_t> ids;
            {
              py::gil_scoped_release release;
              ids = tokenizer.Encode(text, parse_special);
            }
            return ids;
          },
          py::arg("text"), py::arg("parse_special") = true, "Token ids of the text (no BOS added).")
      .def(
          "decode",
          [](const Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
            std::string bytes;
            {
              py::gil_scoped_release release;
              bytes = tokenizer.Decode(ids, skip_special);
            }
            PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<Py_ssize_t>(bytes.size()), "replace");
            if (text == nullptr) throw py::error_already_set();
            return py::reinterpret_steal<py::str>(text);
          },
          py::arg("ids"), py::arg("skip_special") = false, "The text of the ids (invalid UTF-8 becomes U+FFFD).")
      .def("token_to_id", &Tokenizer::TokenId, py::arg("text"), "The id of a vocabulary or added token, or None.")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size, "Highest id + 1.")
      .def_property_readonly("bos_id", &Tokenizer::bos_id)
      .def_property_readonly("eos_id", &Tokenizer::eos_id);
}

}  // namespace envforge::python
