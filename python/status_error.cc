#include "python/status_error.h"

#include <pybind11/pybind11.h>

#include <stdexcept>

namespace envforge::python {

void RaiseStatus(const Status& status) {
  const bool bad_input = status.code() == StatusCode::kInvalidArgument || status.code() == StatusCode::kNotFound ||
                         status.code() == StatusCode::kDataLoss;
  if (bad_input) throw pybind11::value_error(status.message());
  throw std::runtime_error(status.ToString());
}

}  // namespace envforge::python
