"""Session runtime of envforge-worker (embedded in the binary; see sandbox/internal/wire.h).

The zygote calls load() once; every session (a fork of the zygote) calls start_session() and
then handle() for each frame. handle() never raises: every failure becomes a typed reply.
Kept lean on purpose: one json.loads, one dict lookup, the call, one encode per tool call.
"""

import _string as _string_module
import ast
import builtins
import copy
import decimal
import gc
import inspect
import json
import os
import random
import signal
import sys
import types

import _signal

import _envforge
import _envforge_analyze as _analysis
import _envforge_schema  # toolsets/json_schema.h, the one validator (sandbox/worker/schema_module.cc)

_loads = json.loads
# Results and answers travel inside frames whose every parse is depth-bounded (base/json.h).
_too_deep = _envforge.json_value_too_deep
_MAX_DEPTH = _envforge.MAX_JSON_VALUE_DEPTH
_dumps = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_setitimer = signal.setitimer
_ITIMER_REAL = signal.ITIMER_REAL

# Modules imported once in the zygote, so sessions share them and never touch the file system
# to import them after isolation.
_PREIMPORT = (
    "json", "math", "itertools", "functools", "collections", "collections.abc", "re",
    "datetime", "statistics", "heapq", "bisect", "ctypes", "signal", "os", "os.path", "random",
    "string", "decimal", "fractions", "operator", "copy", "time", "typing", "dataclasses",
    "enum", "textwrap", "unicodedata", "hashlib", "base64", "uuid", "csv", "io", "struct",
    "array", "socket", "subprocess", "errno", "traceback", "numbers", "zlib", "difflib",
    "calendar", "locale", "contextlib", "weakref", "pprint",
)
_FRAME_LIMIT = 48 << 20       # keeps a reply far below the wire's 64 MiB frame limit
_STDOUT_LIMIT = 4 << 20


class WallTimeExceeded(BaseException):
    """Raised by the SIGALRM handler; a BaseException so `except Exception` cannot swallow it."""


class RuleViolation(BaseException):
    """A solution or verifier reached for something forbidden (import, open, eval, ...)."""


class ToolError(Exception):
    """A tool called from a solution raised; the message is "tool: ExcType: message"."""


class ToolCallError(Exception):
    """A solution called an unknown tool or passed arguments that fail the tool's schema."""


class _Capture:
    """sys.stdout/sys.stderr of a session: bounded, drained after every call."""

    __slots__ = ("parts", "size", "limit", "dropped")

    def __init__(self):
        self.parts = []
        self.size = 0
        self.limit = _STDOUT_LIMIT
        self.dropped = 0

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        n = len(text)
        room = self.limit - self.size
        if n <= room:
            self.parts.append(text)
            self.size += n
        else:
            if room > 0:
                self.parts.append(text[:room])
                self.size += room
            self.dropped += n - max(room, 0)
        return n

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def take(self):
        if not self.parts:
            return None
        text = "".join(self.parts)
        if self.dropped:
            text += "\n[... %d more characters of output dropped]" % self.dropped
        self.parts = []
        self.size = 0
        self.dropped = 0
        return text


class _Task:
    __slots__ = ("id", "version", "solution", "solution_problem", "verifier", "verifier_problem",
                 "oracle", "oracle_problem")


_out = _Capture()
_tools = {}          # name -> function
_schemas = {}        # name -> _envforge_schema.Schema (compiled once, at load), or the compile error
_params = {}         # name -> parameter names a solution may pass positionally, in order
_tasks = {}          # id -> _Task
_session_db = None
_verifier_db = None
_task = None
_wall = 10.0
_wall_ms = 10000
_max_output = 1 << 20
_memory_bytes = 0
_disk_bytes = 0  # the session family's tmpfs size: ENOSPC in its scratch directory is that budget
_fired = False
_touched = False     # a tool or a solution ran here: this process may no longer judge
_recycled = False    # served an episode before recycle(): never judges, whatever _touched says
_context = "solution"
_violations = []
_safe_builtins = {}
_real_import = builtins.__import__


def _mark_touched():
    global _touched
    _touched = True


def _on_alarm(signum, frame):
    global _fired
    _fired = True
    raise WallTimeExceeded()


def _arm():
    global _fired
    _fired = False
    _setitimer(_ITIMER_REAL, _wall)


def _disarm():
    _setitimer(_ITIMER_REAL, 0)


# ---------------------------------------------------------------------------------------------
# Replies (JSON text built by concatenation: the content is encoded once).

def _reply(cid, outcome, message, limit=None, extra=None):
    out = {"id": cid, "outcome": outcome, "message": message}
    if limit:
        out["limit"] = limit
    if extra:
        out.update(extra)
    stdout = _out.take()
    if stdout and outcome != "infra_error":
        out["stdout"] = stdout
    return _dumps(out)


def _describe(exc):
    try:
        text = str(exc)
    except BaseException:  # a broken __str__ must not break the reply
        text = ""
    name = type(exc).__name__
    return "%s: %s" % (name, text) if text else name


def _where(exc, filename):
    """ "tools.py:12 (get_hotel)" for the last frame of `filename` in the traceback."""
    tb = exc.__traceback__
    found = None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == filename:
            found = "%s:%d (%s)" % (filename, tb.tb_lineno, code.co_name)
        tb = tb.tb_next
    return found


def _error_message(exc):
    if isinstance(exc, MemoryError):
        text = _describe(exc)
        return "%s (the session's memory limit is %d bytes)" % (
            text if text != "MemoryError" else "MemoryError: out of memory", _memory_bytes)
    if _limit_of_disk(exc):
        return "%s (the session's disk budget is %d bytes)" % (_describe(exc), _disk_bytes)
    return _describe(exc)


def _limit_of_disk(exc):
    # ENOSPC or EDQUOT: the only file system a session may write is its scratch tmpfs.
    return _disk_bytes > 0 and isinstance(exc, OSError) and exc.errno in (28, 122)


def _limit_of(exc):
    global _pids_hits_seen
    if isinstance(exc, MemoryError):
        return "memory"
    if _limit_of_disk(exc):
        return "disk"
    if isinstance(exc, BlockingIOError):
        # The pids cgroup counts the forks it refused; read only on this (rare) error path.
        hits = _envforge.pids_limit_hits()
        if hits < 0:  # no counter (a fork copy, or no pids cgroup): EAGAIN from fork is the limit
            return "processes" if exc.errno == 11 else None
        if hits > _pids_hits_seen:
            _pids_hits_seen = hits
            return "processes"
    return None


def _encode(text):
    return text.encode("utf-8", "replace")


_pids_hits_seen = 0


# ---------------------------------------------------------------------------------------------
# Ops

def _call(msg):
    cid = msg.get("id")
    name = msg.get("name")
    fn = _tools.get(name)
    if fn is None:
        if name == "submit_result":
            return _reply(cid, "invalid_call", "submit_result is judged by the manager in a fresh "
                          "session process (op \"judge\"), never in the episode's session")
        return _reply(cid, "invalid_call", "unknown tool %r" % (name,))
    _mark_touched()
    args = msg.get("arguments", {})
    if type(args) is not dict:
        return _reply(cid, "invalid_call", "arguments of %r must be a JSON object" % (name,))
    try:
        try:
            _arm()
            try:
                result = fn(**args)
            finally:
                _disarm()
        except WallTimeExceeded:
            return _timeout(cid, "tool %r" % name)
        except BaseException as exc:
            if _fired:
                return _timeout(cid, "tool %r" % name)
            where = _where(exc, "tools.py")
            return _reply(cid, "tool_error", _error_message(exc), _limit_of(exc),
                          {"where": where} if where else None)
        if _fired:  # the tool swallowed the alarm and returned anyway
            return _timeout(cid, "tool %r" % name)
        try:
            content = _dumps(result)
        except (TypeError, ValueError, RecursionError) as exc:
            return _reply(cid, "tool_error", "tool %r returned a value that is not "
                          "JSON-serialisable: %s" % (name, _describe(exc)))
        if _too_deep(content):
            return _reply(cid, "tool_error", "tool %r returned a value nested deeper than %d levels "
                          "of lists and dicts" % (name, _MAX_DEPTH))
        return _ok_content(cid, name, content)
    except WallTimeExceeded:  # the alarm raced with the return path
        return _timeout(cid, "tool %r" % name)
    except MemoryError:
        return _reply(cid, "tool_error", "MemoryError while encoding the result of %r" % name,
                      "memory")


def _ok_content(cid, name, content):
    size = len(content)
    if size * 4 > _max_output:  # cheap pre-check; the exact size needs the UTF-8 encoding
        size = len(_encode(content))
        if size > _max_output:
            return _reply(cid, "tool_error", "tool %r returned %d bytes of JSON, over the output "
                          "limit of %d bytes" % (name, size, _max_output), "output_size")
    head = '{"id":' + _dumps(cid) + ',"outcome":"ok","content":'
    stdout = _out.take()
    if stdout:
        return head + content + ',"stdout":' + _dumps(stdout) + "}"
    return head + content + "}"


def _timeout(cid, what):
    return _reply(cid, "timeout", "%s exceeded the wall-time limit of %d ms and was interrupted"
                  % (what, _wall_ms), "wall_time")


def _restricted_globals(name):
    return {"__builtins__": _safe_builtins, "__name__": name}


def _load_judge(code, who):
    """verify() of a compiled verifier or oracle, executed in a fresh restricted namespace.
    Returns (verify, None) or (None, (defect message, limit))."""
    global _context
    _context = "verifier"
    del _violations[:]
    try:
        _arm()
        try:
            namespace = _restricted_globals("verifier")
            exec(code, namespace)
        finally:
            _disarm()
    except WallTimeExceeded:
        return None, ("%s exceeded the wall-time limit of %d ms while loading" % (who, _wall_ms), "wall_time")
    except BaseException as exc:
        if _fired:
            return None, ("%s exceeded the wall-time limit of %d ms while loading" % (who, _wall_ms), "wall_time")
        return None, ("%s raised %s while loading" % (who, _describe(exc)), _limit_of(exc))
    verify = namespace.get("verify")
    if not callable(verify):
        return None, ("%s does not define verify(answer, db)" % who, None)
    return verify, None


def _judge_one(verify, who, filename, text):
    """Runs verify on one answer text. Returns (verdict content, None) or (None, (defect, limit))."""
    try:
        answer = _loads(text)
    except (ValueError, RecursionError):
        answer = text
    del _violations[:]
    try:
        try:
            _arm()
            try:
                verdict = verify(answer, _verifier_db)
            finally:
                _disarm()
        except WallTimeExceeded:
            return None, ("%s exceeded the wall-time limit of %d ms" % (who, _wall_ms), "wall_time")
        except RuleViolation as exc:
            return None, ("%s broke a rule: %s" % (who, exc), None)
        except BaseException as exc:
            if _fired:
                return None, ("%s exceeded the wall-time limit of %d ms" % (who, _wall_ms), "wall_time")
            where = _where(exc, filename)
            return None, ("%s raised %s%s" % (who, _describe(exc), " at " + where if where else ""),
                          _limit_of(exc))
    except WallTimeExceeded:
        return None, ("%s exceeded the wall-time limit of %d ms" % (who, _wall_ms), "wall_time")
    _out.take()  # a verifier's prints may reveal the expected answer: never returned
    if _violations:
        return None, ("%s broke a rule: %s" % (who, _violations[0]), None)
    content, why = _normalise_verdict(verdict)
    if content is None:
        return None, ("%s returned %s" % (who, why), None)
    return content, None


_MAX_REASONS = 16
_MAX_REASON_CHARS = 400


def _judge(cid, msg):
    """op "judge": the task's verifier or oracle on a batch of answer texts. Served only by a
    session that never ran a tool or a solution (the manager spawns a fresh one per judgement)."""
    task = _task
    if task is None:
        return _reply(cid, "invalid_call", "judge: this session has no task")
    if _touched or _recycled:
        return _reply(cid, "invalid_call", "judge: this session already ran episode code (a tool "
                      "or a solution); verdicts come only from a fresh session")
    which = msg.get("judge")
    answers = msg.get("answers")
    if which not in ("verifier", "oracle") or type(answers) is not list \
            or not all(isinstance(a, str) for a in answers):
        return _reply(cid, "invalid_call", "judge needs {\"judge\": \"verifier\"|\"oracle\", \"answers\": [string]}")
    code = task.verifier if which == "verifier" else task.oracle
    problem = task.verifier_problem if which == "verifier" else task.oracle_problem
    who = "the %s of task %r" % (which, task.id)
    if code is None and problem is None:
        return _reply(cid, "invalid_call", "task %r has no %s" % (task.id, which))
    verdicts = []
    if problem:
        verdicts = [{"defect": "%s breaks the rules: %s" % (who, problem)}] * len(answers)
    else:
        _out.take()
        verify, defect = _load_judge(code, who)
        for text in answers:
            if defect is None:
                content, one_defect = _judge_one(verify, who, code.co_filename, text)
            else:
                content, one_defect = None, defect
            if one_defect is not None:
                entry = {"defect": one_defect[0]}
                if one_defect[1]:
                    entry["limit"] = one_defect[1]
                verdicts.append(entry)
                continue
            reasons = content["reasons"]
            if len(reasons) > _MAX_REASONS:
                reasons = reasons[:_MAX_REASONS] + ["... %d more" % (len(reasons) - _MAX_REASONS)]
            content["reasons"] = [r if len(r) <= _MAX_REASON_CHARS else r[:_MAX_REASON_CHARS] + "..."
                                  for r in reasons]
            verdicts.append(content)
    return '{"id":' + _dumps(cid) + ',"outcome":"ok","verdicts":' + _dumps(verdicts) + "}"


def _normalise_verdict(verdict):
    """({"passed","score","reasons"}, None) or (None, why)."""
    if isinstance(verdict, bool):
        return {"passed": verdict, "score": 1.0 if verdict else 0.0, "reasons": []}, None
    if not isinstance(verdict, dict):
        return None, ("%s; expected a bool or {\"passed\": bool, \"score\": float, "
                      "\"reasons\": [str]}" % type(verdict).__name__)
    passed = verdict.get("passed")
    if not isinstance(passed, bool):
        return None, "a verdict whose \"passed\" is not a bool (%r)" % (passed,)
    score = verdict.get("score", None)
    if score is None:
        score = 1.0 if passed else 0.0
    elif isinstance(score, bool) or not isinstance(score, (int, float)) or score != score \
            or score in (float("inf"), float("-inf")):
        return None, "a verdict whose \"score\" is not a finite number (%r)" % (score,)
    reasons = verdict.get("reasons", [])
    if reasons is None:
        reasons = []
    if not isinstance(reasons, (list, tuple)) or not all(isinstance(r, str) for r in reasons):
        return None, "a verdict whose \"reasons\" is not a list of strings"
    return {"passed": passed, "score": float(score), "reasons": list(reasons)}, None


def _solve(cid):
    global _context
    task = _task
    if task is None:
        return _reply(cid, "tool_error", "solve: this session has no task")
    who = "the solution of task %r" % task.id
    if task.solution_problem:
        return _reply(cid, "tool_error", "%s breaks the rules: %s" % (who, task.solution_problem))
    _mark_touched()
    _out.take()
    del _violations[:]
    _context = "solution"
    try:
        try:
            _arm()
            try:
                namespace = _restricted_globals("solution")
                exec(task.solution, namespace)
                solve = namespace.get("solve")
                if not callable(solve):
                    return _reply(cid, "tool_error", "%s does not define solve(tools)" % who)
                answer = solve(_PROXY)
            finally:
                _disarm()
        except WallTimeExceeded:
            return _timeout(cid, who)
        except RuleViolation as exc:
            return _reply(cid, "tool_error", "%s broke a rule: %s" % (who, exc))
        except BaseException as exc:
            if _fired:
                return _timeout(cid, who)
            where = _where(exc, task.solution.co_filename)
            return _reply(cid, "tool_error", "%s raised %s%s" % (
                who, _describe(exc), " at " + where if where else ""), _limit_of(exc))
        if _violations:  # the solution caught the violation and went on: still a violation
            return _reply(cid, "tool_error", "%s broke a rule: %s" % (who, _violations[0]))
        try:
            answer_json = _dumps(answer)
        except (TypeError, ValueError, RecursionError) as exc:
            return _reply(cid, "tool_error", "%s returned an answer that is not "
                          "JSON-serialisable: %s" % (who, _describe(exc)))
        if _too_deep(answer_json):
            return _reply(cid, "tool_error", "%s returned an answer nested deeper than %d levels "
                          "of lists and dicts" % (who, _MAX_DEPTH))
        text = answer if isinstance(answer, str) else answer_json
        out = ('{"id":' + _dumps(cid) + ',"outcome":"ok","answer":' + answer_json +
               ',"answer_text":' + _dumps(text))
        stdout = _out.take()
        if stdout:
            out += ',"stdout":' + _dumps(stdout)
        return out + "}"
    except WallTimeExceeded:
        return _timeout(cid, who)


def _bind(cid, msg):
    """op "bind": gives a session started ahead of demand (with no task) its task. Only once, and
    only before any tool or solution ran: what a session did is never re-attributed."""
    global _task
    task = _tasks.get(msg.get("task"))
    if task is None:
        return _reply(cid, "invalid_call", "bind: unknown task %r" % (msg.get("task"),))
    if _task is not None or _touched:
        return _reply(cid, "invalid_call", "bind: this session already has a task or ran episode code")
    _task = task
    return _dumps({"id": cid, "outcome": "ok"})


def handle(frame):
    """One frame -> (0, reply bytes) | (1, fork request bytes) | (2, b"") to close."""
    try:
        try:
            msg = _loads(frame)
        except (ValueError, RecursionError) as exc:
            return 0, _encode(_reply(None, "infra_error", "malformed frame: %s" % exc))
        if type(msg) is not dict:
            return 0, _encode(_reply(None, "infra_error", "a frame must be a JSON object"))
        op = msg.get("op")
        if op == "call":
            return 0, _encode(_call(msg))
        if op == "solve":
            return 0, _encode(_solve(msg.get("id")))
        if op == "judge":
            return 0, _encode(_judge(msg.get("id"), msg))
        if op == "bind":
            return 0, _encode(_bind(msg.get("id"), msg))
        if op == "fork":
            return 1, frame
        if op == "recycle":
            return 3, frame
        if op == "close":
            return 2, b""
        return 0, _encode(_reply(msg.get("id"), "infra_error", "unknown op %r" % (op,)))
    except BaseException as exc:  # WallTimeExceeded racing, MemoryError while replying, ...
        _disarm()
        try:
            cid = msg.get("id")  # noqa: F821 (msg may be unbound)
        except BaseException:
            cid = None
        return 0, _encode(_reply(cid, "infra_error", "worker runtime failed: %s" % _describe(exc)))


# ---------------------------------------------------------------------------------------------
# Solutions' view of the tools

def _violation(message):
    _violations.append(message)
    raise RuleViolation(message)


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level != 0:
        _violation("relative import is not allowed in a %s" % _context)
    if name.partition(".")[0] not in _analysis.ALLOWED_MODULES:
        _violation("import of %r is not allowed in a %s" % (name, _context))
    return _module_proxy(_real_import(name, globals, locals, fromlist, level))


class _AllowedModule(types.SimpleNamespace):
    """What `import json` gives a solution, verifier or oracle: the module's public functions,
    classes and constants, read-only. The modules it imported itself (statistics.sys,
    json.codecs, ...) are not there; its own submodules (collections.abc) are, as proxies."""

    __slots__ = ()

    def __setattr__(self, name, value):
        raise AttributeError("the allowed modules are read-only")

    def __delattr__(self, name):
        raise AttributeError("the allowed modules are read-only")

    def __repr__(self):
        return "<allowed module>"


_module_proxies = {}  # module name -> _AllowedModule


def _module_proxy(module):
    name = module.__name__
    proxy = _module_proxies.get(name)
    if proxy is not None:
        return proxy
    public = getattr(module, "__all__", None)
    if public is None:
        public = [n for n in vars(module) if not n.startswith("_")]
    attributes = {}
    for attribute in public:
        if attribute.startswith("_") or not hasattr(module, attribute):
            continue
        value = getattr(module, attribute)
        if not isinstance(value, types.ModuleType):
            attributes[attribute] = value
    for attribute, value in vars(module).items():  # public submodules already imported (json.decoder)
        if not attribute.startswith("_") and isinstance(value, types.ModuleType) \
                and value.__name__ == name + "." + attribute:
            attributes[attribute] = _module_proxy(value)
    proxy = _AllowedModule(**attributes)
    _module_proxies[name] = proxy
    return proxy


# str.format and str.format_map walk attributes and items of their arguments by name, from a
# string that may be built at run time ("{0." + "__class__}"): compiled task files reach them
# only through _format_attribute, whose formatters refuse underscore names.
_field_name_split = _string_module.formatter_field_name_split
_formatter_parser = _string_module.formatter_parser
_str_format = str.format
_str_format_map = str.format_map


def _check_format(template):
    if not isinstance(template, str):
        return
    for _, field, spec, _ in _formatter_parser(template):
        if field is None:
            continue
        first, rest = _field_name_split(field)
        names = [first] if isinstance(first, str) else []
        names.extend(key for _, key in rest if isinstance(key, str))
        for key in names:
            if key.startswith("_"):
                _violation("a format field reaching %r is not allowed in a %s" % (key, _context))
        if spec:
            _check_format(spec)


def _safe_format(template, *args, **kwargs):
    _check_format(template)
    return _str_format(template, *args, **kwargs)


def _safe_format_map(template, mapping):
    _check_format(template)
    return _str_format_map(template, mapping)


def _format_attribute(obj, name):
    """`obj.format` / `obj.format_map` in a compiled task file (see _SafeFormatRewriter)."""
    if name not in ("format", "format_map"):
        _violation("attribute %r through the format guard is not allowed in a %s" % (name, _context))
    value = getattr(obj, name)
    if value is _str_format:
        return _safe_format
    if value is _str_format_map:
        return _safe_format_map
    if type(value) is types.BuiltinMethodType and isinstance(getattr(value, "__self__", None), str) \
            and getattr(value, "__name__", None) in ("format", "format_map"):
        template = value.__self__
        safe = _safe_format if name == "format" else _safe_format_map

        def bound(*args, **kwargs):
            return safe(template, *args, **kwargs)
        return bound
    return value


class _SafeFormatRewriter(ast.NodeTransformer):
    """x.format / x.format_map (loads) -> _envforge_format_attribute(x, "format")."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr in ("format", "format_map") and isinstance(node.ctx, ast.Load):
            call = ast.Call(func=ast.Name(id="_envforge_format_attribute", ctx=ast.Load()),
                            args=[node.value, ast.Constant(value=node.attr)], keywords=[])
            return ast.copy_location(call, node)
        return node


def _forbidden(name):
    def forbidden(*args, **kwargs):
        _violation("%s() is not allowed in a %s" % (name, _context))
    forbidden.__name__ = name
    return forbidden


_SAFE_BUILTIN_NAMES = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "classmethod", "complex", "dict", "dir", "divmod", "enumerate", "filter", "float", "format",
    "frozenset", "hasattr", "hash", "hex", "id", "int", "isinstance", "issubclass", "iter",
    "len", "list", "map", "max", "min", "next", "object", "oct", "ord", "pow", "print",
    "property", "range", "repr", "reversed", "round", "set", "slice", "sorted", "staticmethod",
    "str", "sum", "super", "tuple", "type", "zip", "aiter", "anext", "NotImplemented",
    "Ellipsis", "__build_class__",
)


def _build_safe_builtins():
    safe = {}
    for name in _SAFE_BUILTIN_NAMES:
        if hasattr(builtins, name):
            safe[name] = getattr(builtins, name)
    for name, value in vars(builtins).items():
        if isinstance(value, type) and issubclass(value, BaseException):
            safe[name] = value
    for name in _analysis.FORBIDDEN_NAMES:
        safe[name] = _forbidden(name)
    safe["__import__"] = _guarded_import
    safe["_envforge_format_attribute"] = _format_attribute
    safe["ToolError"] = ToolError
    safe["ToolCallError"] = ToolCallError
    return safe


def _proxy_call(name, args, kwargs):
    fn = _tools.get(name)
    if fn is None:
        raise ToolCallError("unknown tool %r" % name)
    params = _params[name]
    if len(args) > len(params):
        raise ToolCallError("tool %r takes at most %d positional arguments (%d given)"
                            % (name, len(params), len(args)))
    arguments = dict(zip(params, args))
    for key, value in kwargs.items():
        if key in arguments:
            raise ToolCallError("tool %r got multiple values for argument %r" % (name, key))
        arguments[key] = value
    try:  # the agent's arguments arrive as JSON: so do the solution's
        text = _dumps(arguments)
        arguments = _loads(text)
    except (TypeError, ValueError) as exc:
        raise ToolCallError("arguments of %r are not JSON: %s" % (name, exc)) from None
    schema = _schemas[name]
    problem = ("arguments invalid: schema is invalid: " + schema if isinstance(schema, str)
               else schema.check(text))
    if problem:
        raise ToolCallError("invalid call to tool %r: %s" % (name, problem))
    try:
        result = fn(**arguments)
    except (WallTimeExceeded, RuleViolation, MemoryError):
        raise
    except BaseException as exc:
        raise ToolError("%s: %s" % (name, _describe(exc))) from None
    try:
        return _loads(_dumps(result))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolError("%s returned a value that is not JSON-serialisable: %s"
                        % (name, _describe(exc))) from None


class _ToolsProxy:
    """`tools` in solve(tools): tools.name(*args, **kwargs). Has no attributes of its own."""

    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            return _proxy_call(name, args, kwargs)
        call.__name__ = name
        return call


_PROXY = _ToolsProxy()


# ---------------------------------------------------------------------------------------------
# Zygote and session set-up

class LoadError(Exception):
    pass


def _compile_task_file(path, source, kind):
    """(code, None) or (None, problem text)."""
    if not source.strip():
        return None, "the task has no %s" % kind
    problems = _analysis.check_task_source(path, source, kind)
    if problems:
        text = "; ".join("line %d: %s" % (p["line"], p["message"]) for p in problems[:3])
        if len(problems) > 3:
            text += "; and %d more" % (len(problems) - 3)
        return None, text
    tree = _SafeFormatRewriter().visit(ast.parse(source, filename=path))
    return compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True), None


def _positional_params(fn):
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in signature.parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def load(bundle_path, tools_source, tools, tasks, session_db, verifier_db):
    """Zygote start-up. tools: [(name, schema_json)], tasks: [(id, solution, verifier, version)].
    Raises LoadError naming the bundle and the problem."""
    global _session_db, _verifier_db, _safe_builtins
    gc.disable()
    for name in _PREIMPORT:
        try:
            __import__(name)
        except ImportError:
            pass
    _session_db = session_db
    _verifier_db = verifier_db
    _safe_builtins = _build_safe_builtins()
    sys.stdout = sys.stderr = _out
    module = types.ModuleType("tools")
    module.__file__ = "tools.py"
    module.db = session_db
    sys.modules["tools"] = module
    try:
        code = compile(tools_source, "tools.py", "exec", dont_inherit=True)
        exec(code, module.__dict__)
    except SyntaxError as exc:
        raise LoadError("%s: tools_module does not compile: line %s: %s"
                        % (bundle_path, exc.lineno, exc.msg)) from None
    except BaseException as exc:
        where = _where(exc, "tools.py")
        raise LoadError("%s: tools_module failed to load: %s%s" % (
            bundle_path, _describe(exc), " at " + where if where else "")) from None
    for name, schema_text in tools:
        fn = module.__dict__.get(name)
        if not callable(fn):
            raise LoadError("%s: tool %r of _tools is not a function of tools_module"
                            % (bundle_path, name))
        try:
            _loads(schema_text)
        except ValueError as exc:
            raise LoadError("%s: input_schema of tool %r is not JSON: %s"
                            % (bundle_path, name, exc)) from None
        _tools[name] = fn
        try:  # a schema outside the subset fails each call, as the C++ Validate says
            _schemas[name] = _envforge_schema.compile(schema_text)
        except ValueError as exc:
            _schemas[name] = str(exc)
        _params[name] = _positional_params(fn)
    for task_id, solution, verifier, version, oracle in tasks:
        task = _Task()
        task.id = task_id
        task.version = version
        task.solution, task.solution_problem = _compile_task_file(
            "tasks/%s/solution.py" % task_id, solution, "solution")
        task.verifier, task.verifier_problem = _compile_task_file(
            "tasks/%s/verifier.py" % task_id, verifier, "verifier")
        task.oracle, task.oracle_problem = None, None
        if oracle.strip():
            task.oracle, task.oracle_problem = _compile_task_file(
                "tasks/%s/oracle.py" % task_id, oracle, "oracle")
        _tasks[task_id] = task
    signal.signal(signal.SIGALRM, _on_alarm)
    _snapshot_pristine(module)
    _out.take()
    # Everything allocated so far is shared copy-on-write by every session: move it out of the
    # collector's reach so a session's collections never write to (and so copy) those pages.
    gc.collect()
    gc.freeze()
    gc.enable()


def start_session(task_id, wall_ms, max_output, memory_bytes=0, disk_bytes=0):
    global _task, _wall, _wall_ms, _max_output, _memory_bytes, _disk_bytes
    if task_id:
        task = _tasks.get(task_id)
        if task is None:
            raise LoadError("unknown task %r" % task_id)
        _task = task
    _wall_ms = max(1, int(wall_ms))
    _wall = _wall_ms / 1000.0
    _max_output = max(1, min(int(max_output), _FRAME_LIMIT))
    _out.limit = min(_max_output, _STDOUT_LIMIT)
    _memory_bytes = int(memory_bytes)
    _disk_bytes = int(disk_bytes)


# ---------------------------------------------------------------------------------------------
# Recycling: one session process serving several episodes of its environment, one after another.
# What an episode can leave behind in this interpreter, and how recycle() undoes it:
#   the data                        the main database copied back from the pristine image
#   tools.py's module globals       rebound as load() left them; mutable values deep-copied
#                                   from copies taken at load; lru caches cleared; functions'
#                                   default arguments and tools.py classes' plain attributes too
#   decimal, environ, signal        put back to the zygote's state
#   handlers, umask, recursion
#   limit
#   random                          reseeded from the system, as random's after-fork hook does
#                                   in a fresh fork (other at-fork hooks do not run)
#   the runtime's episode state     task, touched, output, violations
# Not undone (recycle() cannot see them): state inside closures, in objects reached only through
# other objects' attributes, or in other modules that tools.py changed. The manager recycles only
# when asked to (ManagerOptions::episodes_per_session_process), and never lets such a process
# judge.

_pristine = None


class _Pristine:
    __slots__ = ("module", "bindings", "values", "caches", "defaults", "fixed_defaults",
                 "class_attributes", "decimal_context", "environ", "environ_data", "handlers", "umask",
                 "recursion_limit", "unrecyclable")


def _is_code_like(value):
    return isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType,
                              types.MethodType, type, _envforge.Db))


def _plain_class_attributes(cls):
    return {name: value for name, value in vars(cls).items()
            if not name.startswith("__") and not _is_code_like(value)
            and not isinstance(value, (staticmethod, classmethod, property))}


def _snapshot_pristine(module):
    """At the end of load(), in the zygote: what recycle() restores (see above)."""
    global _pristine
    p = _Pristine()
    p.module = module
    p.bindings = dict(module.__dict__)
    p.values = {}
    p.caches = []
    p.defaults = []
    p.fixed_defaults = []
    p.class_attributes = []
    p.unrecyclable = ""
    try:
        for name, value in p.bindings.items():
            if callable(getattr(value, "cache_clear", None)):
                p.caches.append(value)
            if isinstance(value, types.FunctionType) and value.__globals__ is module.__dict__:
                defaults = copy.deepcopy(value.__defaults__)
                if value.__kwdefaults__ is None and defaults is value.__defaults__:
                    # Immutable all the way down (deepcopy gave the object back): putting the
                    # tuple back is enough, no copy per episode.
                    p.fixed_defaults.append((value, value.__defaults__))
                else:
                    p.defaults.append((value, defaults, copy.deepcopy(value.__kwdefaults__)))
            elif isinstance(value, type) and value.__module__ == "tools":
                p.class_attributes.append((value, copy.deepcopy(_plain_class_attributes(value))))
            elif not _is_code_like(value) and not name.startswith("__"):
                p.values[name] = copy.deepcopy(value)
    except Exception as exc:  # a lock, a generator, a file: its state cannot be copied back
        p.unrecyclable = "tools.py keeps a module-level value that cannot be copied (%s)" % _describe(exc)
    p.decimal_context = decimal.getcontext().copy()
    p.environ = dict(os.environ)
    p.environ_data = dict(_environ_data())
    p.handlers = {}
    for number in signal.valid_signals():
        try:
            p.handlers[number] = _signal.getsignal(number)
        except (ValueError, OSError):
            pass
    p.umask = os.umask(0o077)
    os.umask(p.umask)
    p.recursion_limit = sys.getrecursionlimit()
    _pristine = p


def _environ_data():
    """os.environ's encoded mapping: comparing it is a plain dict comparison, where comparing
    os.environ itself decodes every key and value (about 60 us a recycle)."""
    data = getattr(os.environ, "_data", None)
    return data if isinstance(data, dict) else dict(os.environ)


def _restore_signal_handlers(handlers):
    # _signal's raw handlers (ints for SIG_DFL and SIG_IGN): signal.getsignal would build an enum
    # per signal, most of a recycle's time here.
    for number, handler in handlers.items():
        if handler is None or _signal.getsignal(number) is handler:
            continue
        try:
            _signal.signal(number, handler)
        except (ValueError, OSError, TypeError):
            pass


def recycle():
    """After the C++ side's checks (no process of the episode left, scratch directory emptied;
    the manager counts the threads once this answered): puts the interpreter back to the zygote's
    state for a new episode (see above). Returns None, or why this process must not serve another
    episode."""
    global _task, _touched, _recycled, _fired, _context
    _disarm()
    p = _pristine
    if p is None:
        return "the environment was not loaded"
    if p.unrecyclable:
        return p.unrecyclable
    try:
        _session_db._restore_from(_verifier_db)
        module_globals = p.module.__dict__
        module_globals.clear()
        module_globals.update(p.bindings)
        for name, value in p.values.items():
            module_globals[name] = copy.deepcopy(value)
        for cached in p.caches:
            cached.cache_clear()
        for fn, defaults, kwdefaults in p.defaults:
            fn.__defaults__ = copy.deepcopy(defaults)
            fn.__kwdefaults__ = copy.deepcopy(kwdefaults)
        for fn, defaults in p.fixed_defaults:
            if fn.__defaults__ is not defaults or fn.__kwdefaults__ is not None:
                fn.__defaults__ = defaults
                fn.__kwdefaults__ = None
        for cls, attributes in p.class_attributes:
            for name in list(_plain_class_attributes(cls)):
                if name not in attributes:
                    delattr(cls, name)
            for name, value in attributes.items():
                setattr(cls, name, copy.deepcopy(value))
        random.seed()  # as a fork does (random's after-fork hook): no two episodes share a stream
        decimal.setcontext(p.decimal_context.copy())
        if _environ_data() != p.environ_data:
            os.environ.clear()
            os.environ.update(p.environ)
        _restore_signal_handlers(p.handlers)
        os.umask(p.umask)
        sys.setrecursionlimit(p.recursion_limit)
    except BaseException as exc:
        return "restoring the session failed: %s" % _describe(exc)
    sys.stdout = sys.stderr = _out
    _out.take()
    del _violations[:]
    _context = "solution"
    _fired = False
    _task = None
    _touched = False
    _recycled = True
    return None


def has_task(task_id):
    return task_id in _tasks
