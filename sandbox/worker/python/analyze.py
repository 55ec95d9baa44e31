"""Static checks of an environment's Python sources (embedded in envforge-worker).

`envforge-worker analyze` calls analyze(request_json) and prints its result. Nothing here ever
executes the sources: everything is read from their ast. The zygote reuses check_task_source()
at load time, so a task that breaks a rule is refused even when its bundle skipped the analysis.
"""

import ast
import json
import re

# Modules solutions, verifiers and oracles may import (and their submodules): pure computation,
# no I/O, no process or interpreter access.
ALLOWED_MODULES = frozenset([
    "json", "math", "itertools", "functools", "collections", "re", "datetime", "statistics",
    "heapq", "bisect",
])
# Builtins that reach files, code execution or interpreter internals.
FORBIDDEN_NAMES = frozenset([
    "open", "eval", "exec", "compile", "__import__", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "input", "memoryview", "help",
])
# `type(x).__name__` is everywhere in error messages and yields only a string, so it is the one
# dunder allowed; every escape from the restricted namespace needs another one (__class__,
# __globals__, __subclasses__, __builtins__, __dict__, ...).
ALLOWED_DUNDERS = frozenset(["__name__"])
# Frame and code introspection reachable without dunders (generator.gi_frame.f_back.f_globals
# reaches the runtime's globals, hence the database).
FRAME_ATTRIBUTES = frozenset([
    "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "cr_origin",
    "ag_frame", "ag_code", "ag_await", "f_back", "f_globals", "f_locals", "f_builtins", "f_code",
    "tb_frame", "tb_next",
])
_FORMAT_DUNDER = re.compile(r"\{[^{}]*\.__\w+")

_SCALAR_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                 "dict": "object"}
_TYPES = dict(_SCALAR_TYPES, list="array")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|"
                      r"Examples?|Notes?|Attributes|See Also|Todo)\s*:\s*$")
_ARGS_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params)\s*:\s*$")
_ARG_ENTRY = re.compile(r"^\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_RESERVED_TOOL = "submit_result"
_ALLOWED_LIST = ", ".join(sorted(ALLOWED_MODULES))


class _Problems:
    def __init__(self):
        self.items = []

    def add(self, path, line, message):
        self.items.append({"path": path, "line": int(line or 1), "message": message})


def _compile(path, source, problems):
    """The module's ast, or None after recording the syntax error with its line."""
    try:
        tree = ast.parse(source, filename=path)
        # The symbol-table pass catches errors the parser accepts (e.g. `nonlocal` at top level).
        compile(tree, path, "exec", dont_inherit=True)
        return tree
    except SyntaxError as exc:
        problems.add(path, exc.lineno, "syntax error: %s" % (exc.msg,))
    except (ValueError, RecursionError, MemoryError) as exc:
        problems.add(path, 1, "cannot compile: %s" % (exc,))
    return None


# ---------------------------------------------------------------------------------------------
# tools.py

def _annotation_schema(node):
    """(schema, None) for a supported annotation, else (None, why)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return None, "string annotation %r is not a type" % node.value
    if isinstance(node, ast.Name) and node.id in _TYPES:
        return {"type": _TYPES[node.id]}, None
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
            and node.value.id == "list"):
        item = node.slice
        if isinstance(item, ast.Name) and item.id in _SCALAR_TYPES:
            return {"type": "array", "items": {"type": _SCALAR_TYPES[item.id]}}, None
        return None, "list items must be one of str, int, float, bool or dict"
    return None, "unsupported annotation %r" % ast.unparse(node)


def _default_matches(schema, value):
    kind = schema["type"]
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if not isinstance(value, list):
        return False
    items = schema.get("items")
    return items is None or all(_default_matches(items, v) for v in value)


def _doc_description(doc):
    """First paragraph of a cleaned docstring, whitespace-normalised; stops at a section."""
    lines = []
    for line in doc.splitlines():
        if not line.strip():
            if lines:
                break
            continue
        if _SECTION.match(line):
            break
        lines.append(line)
    return " ".join(" ".join(lines).split())


def _doc_arguments(doc):
    """{parameter: description} from a Google-style "Args:" section."""
    result = {}
    lines = doc.splitlines()
    i = 0
    while i < len(lines):
        if not _ARGS_SECTION.match(lines[i]):
            i += 1
            continue
        header_indent = len(lines[i]) - len(lines[i].lstrip())
        i += 1
        entry_indent = None
        current = None
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            indent = len(line) - len(line.lstrip())
            if indent <= header_indent or _SECTION.match(line):
                break
            if entry_indent is None:
                entry_indent = indent
            match = _ARG_ENTRY.match(line.strip()) if indent == entry_indent else None
            if match:
                current = match.group(1)
                result[current] = [match.group(3)]
            elif current is not None and indent > entry_indent:
                result[current].append(line.strip())
            i += 1
        break
    return {name: " ".join(" ".join(parts).split()) for name, parts in result.items()}


def _tool(node, path, source, problems):
    name = node.name
    ok = True
    if name == _RESERVED_TOOL:
        problems.add(path, node.lineno, "tool %r is reserved: the runtime adds it" % name)
        ok = False
    if not _TOOL_NAME.match(name):
        problems.add(path, node.lineno, "tool name %r must match [A-Za-z0-9_.-]{1,128}" % name)
        ok = False
    if isinstance(node, ast.AsyncFunctionDef):
        problems.add(path, node.lineno, "tool %r is async; tools must be plain functions" % name)
        ok = False
    doc = ast.get_docstring(node)
    description = _doc_description(doc) if doc else ""
    if not description:
        problems.add(path, node.lineno,
                     "tool %r has no docstring (its first paragraph is the tool's description)"
                     % name)
        ok = False
    arg_docs = _doc_arguments(doc) if doc else {}

    args = node.args
    for arg in args.posonlyargs:
        problems.add(path, arg.lineno, "tool %r: parameter %r is positional-only; tools are "
                     "called with keyword arguments" % (name, arg.arg))
        ok = False
    if args.vararg is not None:
        problems.add(path, args.vararg.lineno, "tool %r: *%s is not allowed; declare each "
                     "parameter with a type" % (name, args.vararg.arg))
        ok = False
    if args.kwarg is not None:
        problems.add(path, args.kwarg.lineno, "tool %r: **%s is not allowed; declare each "
                     "parameter with a type" % (name, args.kwarg.arg))
        ok = False
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    params = list(zip(args.args, defaults)) + list(zip(args.kwonlyargs, args.kw_defaults))

    properties = {}
    required = []
    for arg, default in params:
        if arg.annotation is None:
            problems.add(path, arg.lineno, "tool %r: parameter %r has no type annotation (use "
                         "str, int, float, bool, dict, list or list[str|int|float|bool|dict])"
                         % (name, arg.arg))
            ok = False
            continue
        schema, why = _annotation_schema(arg.annotation)
        if schema is None:
            problems.add(path, arg.lineno, "tool %r: parameter %r: %s (use str, int, float, "
                         "bool, dict, list or list[str|int|float|bool|dict])"
                         % (name, arg.arg, why))
            ok = False
            continue
        if arg.arg in arg_docs and arg_docs[arg.arg]:
            schema["description"] = arg_docs[arg.arg]
        if default is None:
            required.append(arg.arg)
        else:
            try:
                value = ast.literal_eval(default)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                problems.add(path, default.lineno, "tool %r: the default of parameter %r is "
                             "not a literal" % (name, arg.arg))
                ok = False
                continue
            if not _default_matches(schema, value):
                problems.add(path, default.lineno, "tool %r: parameter %r is annotated %s but "
                             "defaults to %r" % (name, arg.arg, ast.unparse(arg.annotation),
                                                 value))
                ok = False
                continue
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                problems.add(path, default.lineno, "tool %r: the default of parameter %r is "
                             "not JSON" % (name, arg.arg))
                ok = False
                continue
            schema["default"] = value
        properties[arg.arg] = schema
    if not ok:
        return None
    return {
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required,
                        "additionalProperties": False},
        "source": ast.get_source_segment(source, node) or "",
        "line": node.lineno,
    }


def _analyze_tools(path, source, problems):
    tree = _compile(path, source, problems)
    if tree is None:
        return []
    tools = {}
    lines = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "db":
                    problems.add(path, node.lineno, "tools.py assigns the module global 'db'; "
                                 "the runtime injects it")
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if node.name.startswith("_"):
            continue
        if node.name in lines:
            problems.add(path, node.lineno, "tool %r is defined twice (lines %d and %d); the "
                         "second definition replaces the first" % (node.name, lines[node.name],
                                                                  node.lineno))
            tools.pop(node.name, None)
        lines[node.name] = node.lineno
        tool = _tool(node, path, source, problems)
        if tool is not None:
            tools[node.name] = tool
    return sorted(tools.values(), key=lambda t: t["line"])


# ---------------------------------------------------------------------------------------------
# solutions, verifiers, oracles

def _a(kind):
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _is_dunder(name):
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _check_restricted(tree, path, kind, problems):
    kind = _a(kind)  # "a solution", "an oracle"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in ALLOWED_MODULES:
                    problems.add(path, node.lineno, "import of %r is not allowed in %s (allowed: "
                                 "%s)" % (alias.name, kind, _ALLOWED_LIST))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                problems.add(path, node.lineno, "relative import is not allowed in %s" % kind)
            elif (node.module or "").split(".")[0] not in ALLOWED_MODULES:
                problems.add(path, node.lineno, "import of %r is not allowed in %s (allowed: %s)"
                             % (node.module, kind, _ALLOWED_LIST))
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_NAMES:
                problems.add(path, node.lineno, "use of %r is not allowed in %s" % (node.id, kind))
            elif _is_dunder(node.id) and node.id not in ALLOWED_DUNDERS:
                problems.add(path, node.lineno, "use of the dunder name %r is not allowed in %s"
                             % (node.id, kind))
        elif isinstance(node, ast.Attribute):
            if _is_dunder(node.attr) and node.attr not in ALLOWED_DUNDERS:
                problems.add(path, node.lineno, "access to the dunder attribute %r is not allowed "
                             "in %s" % (node.attr, kind))
            elif node.attr in FRAME_ATTRIBUTES:
                problems.add(path, node.lineno, "access to the frame attribute %r is not allowed "
                             "in %s" % (node.attr, kind))
        elif isinstance(node, ast.MatchClass):
            # `case C(attr=p)` reads C's attribute `attr` by name, like `x.attr` does.
            for attr in node.kwd_attrs:
                if attr.startswith("_") or attr in FRAME_ATTRIBUTES:
                    problems.add(path, node.lineno, "a class pattern reading the attribute %r is "
                                 "not allowed in %s" % (attr, kind))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _FORMAT_DUNDER.search(node.value):
                problems.add(path, node.lineno, "format string reaching a dunder attribute is not "
                             "allowed in %s" % kind)


def _check_entry(tree, path, kind, func, params, problems):
    """The module must define `def func(<params>)` at top level with exactly those positionals."""
    signature = "%s(%s)" % (func, ", ".join(params))
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func:
            found = node
    if found is None:
        problems.add(path, 1, "a %s must define `def %s` at module level" % (kind, signature))
        return
    if isinstance(found, ast.AsyncFunctionDef):
        problems.add(path, found.lineno, "%s must be a plain function, not async" % func)
        return
    args = found.args
    positional = args.posonlyargs + args.args
    if (len(positional) != len(params) or args.vararg or args.kwarg or args.kwonlyargs
            or args.defaults):
        problems.add(path, found.lineno, "%s must take exactly %d positional parameter%s: def %s"
                     % (func, len(params), "" if len(params) == 1 else "s", signature))


def check_task_source(path, source, kind):
    """Problems of one solution, verifier or oracle; kind is "solution", "verifier", "oracle"."""
    problems = _Problems()
    tree = _compile(path, source, problems)
    if tree is not None:
        if kind == "solution":
            _check_entry(tree, path, kind, "solve", ["tools"], problems)
        else:
            _check_entry(tree, path, kind, "verify", ["answer", "db"], problems)
        _check_restricted(tree, path, kind, problems)
    problems.items.sort(key=lambda p: p["line"])
    return problems.items


# ---------------------------------------------------------------------------------------------

def _files(request, key):
    files = request.get(key, [])
    if not isinstance(files, list):
        raise ValueError("%r must be a list" % key)
    for item in files:
        if not isinstance(item, dict) or not isinstance(item.get("source"), str):
            raise ValueError("every entry of %r must be an object with a string \"source\"" % key)
    return files


def analyze(request_text):
    """JSON request (see `envforge-worker analyze`) -> JSON result. Raises ValueError when the
    request itself is malformed (the analysis could not run)."""
    request = json.loads(request_text)
    if not isinstance(request, dict):
        raise ValueError("the request must be a JSON object")
    problems = _Problems()
    tools = []
    tools_file = request.get("tools")
    if tools_file is not None:
        if not isinstance(tools_file, dict) or not isinstance(tools_file.get("source"), str):
            raise ValueError("\"tools\" must be an object with a string \"source\"")
        path = tools_file.get("path") or "tools.py"
        tools = _analyze_tools(path, tools_file["source"], problems)
        problems.items.sort(key=lambda p: p["line"])
    for key, kind in (("solutions", "solution"), ("verifiers", "verifier"), ("oracles", "oracle")):
        for item in _files(request, key):
            task = item.get("task") or "?"
            path = item.get("path") or "tasks/%s/%s.py" % (task, kind)
            problems.items.extend(check_task_source(path, item["source"], kind))
    return json.dumps({"tools": tools, "problems": problems.items}, ensure_ascii=False)
