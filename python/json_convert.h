// Conversions between nlohmann JSON values and Python objects for the envforge module.
// JSON null/bool/int/float/string/array/object <-> None/bool/int/float/str/list/dict. Python
// tuples become arrays; JSON strings that are not valid UTF-8 (text a model generated can end
// inside a multi-byte character) become str with U+FFFD for each bad byte; dict keys must be
// str; anything else raises TypeError naming the type.
// PythonToJson raises ValueError for a value nested deeper than kMaxJsonValueDepth (base/json.h),
// which includes a list or dict that contains itself.
// Must be called with the GIL held.
#pragma once

#include <pybind11/pybind11.h>

#include "base/json.h"

namespace envforge::python {

pybind11::object JsonToPython(const Json& value);
Json PythonToJson(pybind11::handle object);

}  // namespace envforge::python
