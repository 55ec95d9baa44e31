// Failed Statuses as Python exceptions, one rule for every binding of the envforge module:
// ValueError for what the caller can fix (base/error_table.h IsCallerError: a bad argument, a
// missing file or name, a corrupt file, a denied permission, a wrong state) with the status's
// message, RuntimeError ("<code>: <message>") for everything else. Safe to call with the GIL released: the exception
// becomes a Python one where pybind11 hands it back to the interpreter.
#pragma once

#include "base/status.h"

namespace envforge::python {

[[noreturn]] void RaiseStatus(const Status& status);

}  // namespace envforge::python
