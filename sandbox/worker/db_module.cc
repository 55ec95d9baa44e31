// `_envforge`: the database object handed to tools (module global `db`) and verifiers.
#include "sandbox/worker/db_module.h"

#include "sandbox/worker/limit_counters.h"

#include "base/json.h"

#include <pybind11/embed.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>

namespace py = pybind11;

namespace envforge::sandbox::worker {
namespace {

// Room for a session's writes beyond the pristine image. Untouched, it costs address space only.
constexpr size_t kMinGrowthReserve = size_t{256} << 20;

// Exception classes, created when the module is imported (before any Db exists).
PyObject* g_database_error = nullptr;
PyObject* g_operational_error = nullptr;
PyObject* g_integrity_error = nullptr;
PyObject* g_programming_error = nullptr;

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

// Lets the session's SIGALRM handler (a Python function) run during long statements: when it
// raises, the statement is interrupted and the exception propagates from query()/execute().
int ProgressHandler(void*) { return PyErr_CheckSignals() != 0 ? 1 : 0; }

// Introspection pragmas that read the schema and change nothing.
bool IsSchemaPragma(const char* name) {
  if (name == nullptr) return false;
  for (const char* allowed :
       {"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo", "foreign_key_list"}) {
    if (sqlite3_stricmp(name, allowed) == 0) return true;
  }
  return false;
}

// Whether a statement may change the connection beyond the main database (which RestoreFrom
// replaces): a PRAGMA that sets something, or a TEMP object (a TEMP view shadows a main table).
bool ChangesConnection(int action, const char* arg1, const char* arg2) {
  switch (action) {
    case SQLITE_PRAGMA: return arg2 != nullptr && !IsSchemaPragma(arg1);
    case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE:
    case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW: return true;
    default: return false;
  }
}

// Tools may read and write their own copy of the data, never other files. `changed` (a bool of
// the Db) records statements that change the connection itself (see ChangesConnection).
int Authorizer(void* changed, int action, const char* arg1, const char* arg2, const char*, const char*) {
  if (action == SQLITE_ATTACH || action == SQLITE_DETACH) return SQLITE_DENY;
  if (ChangesConnection(action, arg1, arg2)) *static_cast<bool*>(changed) = true;
  return SQLITE_OK;
}

// The verifiers' view: reads only. Every write, schema change (TEMP objects included, which
// would shadow the pristine tables), transaction, ATTACH/DETACH and state-changing PRAGMA
// (query_only=0 first of all) is denied when the statement is prepared, so a judgement cannot
// leave anything behind for the next one.
int ReadOnlyAuthorizer(void*, int action, const char* arg1, const char*, const char*, const char*) {
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_FUNCTION:
    case SQLITE_RECURSIVE: return SQLITE_OK;
    case SQLITE_PRAGMA: return IsSchemaPragma(arg1) ? SQLITE_OK : SQLITE_DENY;
    default: return SQLITE_DENY;
  }
}

class Db {
 public:
  Db(sqlite3* db, bool read_only) : db_(db), read_only_(read_only) {
    sqlite3_progress_handler(db_, 1000, &ProgressHandler, nullptr);
    InstallAuthorizer();
  }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;
  ~Db() {
    ForgetStatements();
    // buffer_ is freed with the process: it may hold the live database.
  }

  // See db_module.h. Raises PermissionError on the read-only view, RuntimeError naming the cause
  // when the connection cannot be restored (the session must then not serve another episode).
  void RestoreFrom(const Db& pristine) {
    if (read_only_) Raise(PyExc_PermissionError, "the verifier's view is never restored");
    if (connection_changed_) {
      Raise(PyExc_RuntimeError, "a PRAGMA or a TEMP object changed the connection beyond its data");
    }
    ForgetStatements();
    sqlite3_int64 size = 0;
    unsigned char* image = sqlite3_serialize(pristine.db_, "main", &size, SQLITE_SERIALIZE_NOCOPY);
    if (image == nullptr) Raise(PyExc_RuntimeError, "the pristine database has no contiguous image");
    const size_t capacity = SessionDatabaseCapacity(static_cast<size_t>(size));
    // The deserializes run "ATTACH", which the tools' authorizer refuses; an open transaction is
    // rolled back first (deserialize fails on a busy connection).
    sqlite3_set_authorizer(db_, nullptr, nullptr);
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    // An empty database first lets go of the buffer in use: the zygote's copy (freed, which makes
    // room under RLIMIT_DATA for this process's own) or this process's own (kept and refilled, so
    // after the first restore no page of it is new).
    static unsigned char empty[1];
    int rc = sqlite3_deserialize(db_, "main", empty, 0, 0, 0);
    if (rc == SQLITE_OK && capacity_ < capacity) {
      sqlite3_free(buffer_);
      buffer_ = static_cast<unsigned char*>(sqlite3_malloc64(capacity));
      capacity_ = buffer_ != nullptr ? capacity : 0;
      if (buffer_ == nullptr) rc = SQLITE_NOMEM;
    }
    if (rc == SQLITE_OK) {
      std::memcpy(buffer_, image, static_cast<size_t>(size));
      rc = sqlite3_deserialize(db_, "main", buffer_, size, static_cast<sqlite3_int64>(capacity_), 0);
    }
    InstallAuthorizer();
    if (rc != SQLITE_OK) Raise(PyExc_RuntimeError, std::string("cannot restore the data: ") + sqlite3_errstr(rc));
    sqlite3_set_last_insert_rowid(db_, 0);
  }

  py::list Query(const std::string& sql, py::handle params) {
    sqlite3_stmt* stmt = Prepare(sql);
    Bind(stmt, params);
    py::list rows;
    int columns = sqlite3_column_count(stmt);
    py::list names;
    for (int i = 0; i < columns; ++i) names.append(py::str(sqlite3_column_name(stmt, i)));
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) Fail(stmt, rc);
      py::dict row;
      for (int i = 0; i < columns; ++i) {
        py::object value = ColumnValue(stmt, i);
        if (PyDict_SetItem(row.ptr(), PyList_GET_ITEM(names.ptr(), i), value.ptr()) != 0) {
          Finish(stmt);
          throw py::error_already_set();
        }
      }
      rows.append(std::move(row));
    }
    Finish(stmt);
    return rows;
  }

  int Execute(const std::string& sql, py::handle params) {
    if (read_only_) Raise(PyExc_PermissionError, "this database is read-only (the verifier's view)");
    sqlite3_stmt* stmt = Prepare(sql);
    Bind(stmt, params);
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) Fail(stmt, rc);
    }
    Finish(stmt);
    return sqlite3_changes(db_);
  }

  int64_t LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
  bool read_only() const { return read_only_; }

 private:
  sqlite3_stmt* Prepare(const std::string& sql) {
    auto it = cache_.find(sql);
    if (it != cache_.end()) {
      sqlite3_reset(it->second);
      return it->second;
    }
    sqlite3_stmt* stmt = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail);
    if (rc != SQLITE_OK) {
      if (PyErr_Occurred()) throw py::error_already_set();
      Raise(ErrorType(rc), sqlite3_errmsg(db_));
    }
    if (stmt == nullptr) Raise(g_programming_error, "empty SQL statement");
    if (tail != nullptr && *tail != '\0') {
      sqlite3_stmt* next = nullptr;
      int tail_rc = sqlite3_prepare_v2(db_, tail, -1, &next, nullptr);
      bool more = tail_rc != SQLITE_OK || next != nullptr;
      sqlite3_finalize(next);
      if (more) {
        sqlite3_finalize(stmt);
        Raise(g_programming_error, "only one SQL statement per call is allowed");
      }
    }
    // A small cache: tools repeat the same few statements, and preparing dominates short calls.
    if (cache_.size() >= 64) {
      for (auto& [cached_sql, cached] : cache_) sqlite3_finalize(cached);
      cache_.clear();
    }
    cache_.emplace(sql, stmt);
    return stmt;
  }

  void Bind(sqlite3_stmt* stmt, py::handle params) {
    int wanted = sqlite3_bind_parameter_count(stmt);
    if (params.is_none()) {
      if (wanted != 0) BindError(stmt, "the statement has " + std::to_string(wanted) + " parameters, none given");
      return;
    }
    if (PyDict_Check(params.ptr())) {
      for (int i = 1; i <= wanted; ++i) {
        const char* name = sqlite3_bind_parameter_name(stmt, i);
        if (name == nullptr) BindError(stmt, "positional parameter ? used with a dict of parameters");
        PyObject* value = PyDict_GetItemString(params.ptr(), name + 1);
        if (value == nullptr) BindError(stmt, std::string("no value for the parameter ") + name);
        BindValue(stmt, i, value);
      }
      return;
    }
    if (!PyTuple_Check(params.ptr()) && !PyList_Check(params.ptr())) {
      sqlite3_clear_bindings(stmt);
      Raise(PyExc_TypeError,
            std::string("params must be a tuple, a list or a dict, not ") + Py_TYPE(params.ptr())->tp_name);
    }
    Py_ssize_t given = PySequence_Fast_GET_SIZE(params.ptr());
    if (given != wanted) {
      BindError(stmt,
                "the statement has " + std::to_string(wanted) + " parameters, " + std::to_string(given) + " given");
    }
    for (Py_ssize_t i = 0; i < given; ++i) {
      BindValue(stmt, static_cast<int>(i + 1), PySequence_Fast_GET_ITEM(params.ptr(), i));
    }
  }

  void BindValue(sqlite3_stmt* stmt, int index, PyObject* value) {
    int rc;
    if (value == Py_None) {
      rc = sqlite3_bind_null(stmt, index);
    } else if (PyLong_Check(value)) {
      long long v = PyLong_AsLongLong(value);
      if (v == -1 && PyErr_Occurred()) {
        Finish(stmt);
        throw py::error_already_set();
      }
      rc = sqlite3_bind_int64(stmt, index, v);
    } else if (PyFloat_Check(value)) {
      rc = sqlite3_bind_double(stmt, index, PyFloat_AS_DOUBLE(value));
    } else if (PyUnicode_Check(value)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(value, &size);
      if (text == nullptr) {
        Finish(stmt);
        throw py::error_already_set();
      }
      rc = sqlite3_bind_text64(stmt, index, text, static_cast<sqlite3_uint64>(size), SQLITE_TRANSIENT, SQLITE_UTF8);
    } else if (PyBytes_Check(value)) {
      rc = sqlite3_bind_blob64(stmt, index, PyBytes_AS_STRING(value),
                               static_cast<sqlite3_uint64>(PyBytes_GET_SIZE(value)), SQLITE_TRANSIENT);
    } else if (PyByteArray_Check(value)) {
      rc = sqlite3_bind_blob64(stmt, index, PyByteArray_AS_STRING(value),
                               static_cast<sqlite3_uint64>(PyByteArray_GET_SIZE(value)), SQLITE_TRANSIENT);
    } else {
      Finish(stmt);
      Raise(PyExc_TypeError, std::string("unsupported type for a SQL parameter: ") + Py_TYPE(value)->tp_name);
    }
    if (rc != SQLITE_OK) Fail(stmt, rc);
  }

  static py::object ColumnValue(sqlite3_stmt* stmt, int i) {
    switch (sqlite3_column_type(stmt, i)) {
      case SQLITE_INTEGER: return py::reinterpret_steal<py::object>(PyLong_FromLongLong(sqlite3_column_int64(stmt, i)));
      case SQLITE_FLOAT: return py::reinterpret_steal<py::object>(PyFloat_FromDouble(sqlite3_column_double(stmt, i)));
      case SQLITE_TEXT: {
        const char* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, i));
        PyObject* s = PyUnicode_DecodeUTF8(text, sqlite3_column_bytes(stmt, i), "replace");
        if (s == nullptr) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(s);
      }
      case SQLITE_BLOB: {
        const void* data = sqlite3_column_blob(stmt, i);
        return py::reinterpret_steal<py::object>(
            PyBytes_FromStringAndSize(static_cast<const char*>(data), sqlite3_column_bytes(stmt, i)));
      }
      default: return py::none();
    }
  }

  static void Finish(sqlite3_stmt* stmt) {
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
  }

  [[noreturn]] void BindError(sqlite3_stmt* stmt, const std::string& message) {
    Finish(stmt);
    Raise(g_programming_error, message);
  }

  [[noreturn]] void Fail(sqlite3_stmt* stmt, int rc) {
    std::string message = sqlite3_errmsg(db_);
    Finish(stmt);
    // The progress handler ran the alarm handler, which raised: that exception wins.
    if (PyErr_Occurred()) throw py::error_already_set();
    if ((rc & 0xff) == SQLITE_NOMEM) {
      PyErr_NoMemory();
      throw py::error_already_set();
    }
    Raise(ErrorType(rc), message);
  }

  void InstallAuthorizer() {
    if (read_only_) {
      sqlite3_set_authorizer(db_, &ReadOnlyAuthorizer, nullptr);
    } else {
      sqlite3_set_authorizer(db_, &Authorizer, &connection_changed_);
    }
  }

  void ForgetStatements() {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    cache_.clear();
  }

  static PyObject* ErrorType(int rc) {
    switch (rc & 0xff) {
      case SQLITE_CONSTRAINT: return g_integrity_error;
      case SQLITE_READONLY:
      case SQLITE_AUTH: return PyExc_PermissionError;
      case SQLITE_MISUSE:
      case SQLITE_RANGE: return g_programming_error;
      default: return g_operational_error;
    }
  }

  sqlite3* db_;
  bool read_only_;
  bool connection_changed_ = false;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
  unsigned char* buffer_ = nullptr;  // this process's copy of the data, once restored (see RestoreFrom)
  size_t capacity_ = 0;
};

int g_pids_events_fd = -1;

// "max 3\n" (v1 and v2 pids.events) -> 3; -1 when unknown.
long long PidsLimitHits() {
  if (g_pids_events_fd < 0) return -1;
  char buffer[128];
  ssize_t n = pread(g_pids_events_fd, buffer, sizeof buffer - 1, 0);
  if (n <= 0) return -1;
  buffer[n] = '\0';
  const char* max = strstr(buffer, "max ");
  return max ? strtoll(max + 4, nullptr, 10) : -1;
}

PyObject* NewException(py::module_& m, const char* name, PyObject* base) {
  std::string qualified = std::string("_envforge.") + name;
  PyObject* type = PyErr_NewException(qualified.c_str(), base, nullptr);
  if (type == nullptr) throw py::error_already_set();
  Py_INCREF(type);  // one reference for the module, one kept here for the process's lifetime
  if (PyModule_AddObject(m.ptr(), name, type) != 0) throw py::error_already_set();
  return type;
}

}  // namespace

size_t SessionDatabaseCapacity(size_t image_bytes) { return image_bytes + std::max(kMinGrowthReserve, image_bytes); }

void SetPidsEventsFd(int fd) {
  if (g_pids_events_fd >= 0 && g_pids_events_fd != fd) close(g_pids_events_fd);
  g_pids_events_fd = fd;
}

py::object NewDbObject(sqlite3* db, bool read_only) {
  py::module_::import("_envforge");  // creates the exception classes
  return py::cast(new Db(db, read_only), py::return_value_policy::take_ownership);
}

}  // namespace envforge::sandbox::worker

PYBIND11_EMBEDDED_MODULE(_envforge, m) {
  using envforge::sandbox::worker::Db;
  namespace w = envforge::sandbox::worker;
  w::g_database_error = w::NewException(m, "DatabaseError", PyExc_Exception);
  w::g_operational_error = w::NewException(m, "OperationalError", w::g_database_error);
  w::g_integrity_error = w::NewException(m, "IntegrityError", w::g_database_error);
  w::g_programming_error = w::NewException(m, "ProgrammingError", w::g_database_error);
  py::class_<Db>(m, "Db")
      .def("query", &Db::Query, py::arg("sql"), py::arg("params") = py::tuple())
      .def("execute", &Db::Execute, py::arg("sql"), py::arg("params") = py::tuple())
      .def("last_insert_rowid", &Db::LastInsertRowId)
      .def("_restore_from", &Db::RestoreFrom, py::arg("pristine"))
      .def_property_readonly("read_only", &Db::read_only);
  m.def("pids_limit_hits", &w::PidsLimitHits);
  // runtime.py holds tool results and answers to base/json.h's value bound with this (a linear C++
  // scan of the encoded text; a scan in Python would cost more than the encoding).
  m.def("json_value_too_deep", [](py::str text) -> bool {
    Py_ssize_t size = 0;
    const char* utf8 = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
    if (utf8 == nullptr) throw py::error_already_set();
    return !envforge::CheckJsonTextDepth(std::string_view(utf8, static_cast<size_t>(size)),
                                         envforge::kMaxJsonValueDepth)
                .ok();
  });
  m.attr("MAX_JSON_VALUE_DEPTH") = envforge::kMaxJsonValueDepth;
}
