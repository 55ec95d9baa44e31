#include "python/status_error.h"

#include <pybind11/pybind11.h>

#include <stdexcept>

#include "base/error_table.h"

namespace envforge::python {

void RaiseStatus(const Status& status) {
  if (IsCallerError(status.code())) throw pybind11::value_error(status.message());
  throw std::runtime_error(status.ToString());
}

}  // namespace envforge::python
