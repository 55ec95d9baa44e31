#include "python/json_convert.h"

#include <string>

namespace py = pybind11;

namespace envforge::python {
namespace {

// A model's output can end inside a multi-byte character (byte-level tokens), and such text is
// recorded as generated: decode with U+FFFD for the bad bytes rather than failing the whole value.
py::object Utf8ToPython(const std::string& text) {
  PyObject* decoded = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (decoded == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(decoded);
}

}  // namespace

py::object JsonToPython(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return py::none();
    case Json::value_t::boolean: return py::bool_(value.get<bool>());
    case Json::value_t::number_integer: return py::int_(value.get<int64_t>());
    case Json::value_t::number_unsigned: return py::int_(value.get<uint64_t>());
    case Json::value_t::number_float: return py::float_(value.get<double>());
    case Json::value_t::string: return Utf8ToPython(value.get_ref<const std::string&>());
    case Json::value_t::array: {
      py::list list;
      for (const Json& item : value) list.append(JsonToPython(item));
      return list;
    }
    case Json::value_t::object: {
      py::dict dict;
      for (auto it = value.begin(); it != value.end(); ++it) dict[py::str(it.key())] = JsonToPython(it.value());
      return dict;
    }
    default: return py::none();  // binary and discarded never come out of the parser
  }
}

namespace {

Json PythonToJsonAt(py::handle object, int depth);

Json PythonContainerToJson(py::handle object, int depth) {
  // The bound also ends a self-containing list or dict, which would otherwise recurse until the
  // stack overflows in the caller's process.
  if (depth > kMaxJsonValueDepth) {
    throw py::value_error("value nests deeper than " + std::to_string(kMaxJsonValueDepth) +
                          " levels of lists and dicts (or contains itself); the limit is " +
                          std::to_string(kMaxJsonValueDepth));
  }
  if (py::isinstance<py::dict>(object)) {
    Json result = Json::object();
    for (auto item : object.cast<py::dict>()) {
      if (!py::isinstance<py::str>(item.first)) {
        throw py::type_error("JSON object keys must be str, got " +
                             std::string(py::str(py::type::of(item.first).attr("__name__"))));
      }
      result[item.first.cast<std::string>()] = PythonToJsonAt(item.second, depth);
    }
    return result;
  }
  Json result = Json::array();
  for (auto item : object) result.push_back(PythonToJsonAt(item, depth));
  return result;
}

Json PythonToJsonAt(py::handle object, int depth) {
  if (object.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(object)) return object.cast<bool>();
  if (py::isinstance<py::int_>(object)) {
    // Python ints are unbounded; JSON integers here are 64-bit.
    try {
      return object.cast<int64_t>();
    } catch (const py::cast_error&) {
      throw py::value_error("integer out of the 64-bit range cannot be sent as JSON");
    }
  }
  if (py::isinstance<py::float_>(object)) return object.cast<double>();
  if (py::isinstance<py::str>(object)) return object.cast<std::string>();
  if (py::isinstance<py::dict>(object) || py::isinstance<py::list>(object) || py::isinstance<py::tuple>(object)) {
    return PythonContainerToJson(object, depth + 1);
  }
  throw py::type_error("cannot convert " + std::string(py::str(py::type::of(object).attr("__name__"))) + " to JSON");
}

}  // namespace

Json PythonToJson(py::handle object) { return PythonToJsonAt(object, 0); }

}  // namespace envforge::python
