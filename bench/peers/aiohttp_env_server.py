#!/usr/bin/python3
"""A peer for `envforge bench serve --compare`: the environment server an RL lab usually writes.

What it is, on purpose:
  * one process, one asyncio event loop (aiohttp), no threads and no worker processes: every
    request, tool call and verdict runs on the loop, so a slow tool stalls every client;
  * tools run in process, on a per-session in-memory SQLite copy of the bundle's data tables
    (sqlite3's backup API from one pristine in-memory copy loaded at start);
  * no isolation at all: the bundle's tools.py and verifiers are exec'd in this interpreter with
    its full builtins, no time, memory or file-system limit, no network namespace;
  * no trajectory store, no session expiry, no draining.

It speaks the JSON-RPC 2.0 methods `envforge bench serve` drives, with envforge's result shapes
(server/internal/native_dialect.cc, session_table.cc): envs/list, envs/get, tasks/list,
session/create, tools/list, tools/call, session/submit, session/close, server/stats, ping; over
WebSocket at /ws and HTTP POST at /rpc (plus GET /health). With --token every request must carry
`Authorization: Bearer TOKEN` (HTTP 401 otherwise).

The tools' contract is the envforge worker's (sandbox/worker/python/runtime.py, db_module.h): the
bundle's tools module (_env.tools_module) is executed once with a module global `db` offering
`db.query(sql, params=()) -> list[dict]`, `db.execute(sql, params=()) -> int` and
`db.last_insert_rowid()`; each public function named in _tools is a tool, called as fn(**arguments).
Arguments are checked against the tool's inputSchema with the `jsonschema` package when it is
installed (about 3 us a call for trip_planning's schemas; skipped, and said so at start, without it).

A verdict (session/submit, or tools/call of submit_result) runs the task's verifier in process the
way envforge's judge does: verify(answer, db), where answer is the submitted text parsed as JSON
(the text itself when it is not JSON) and db is a read-only view (PRAGMA query_only) of the
pristine data; a bool or {"passed", "score", "reasons"} comes back as {passed, score, reasons,
verifier_version}. Unlike envforge, the verifier shares the interpreter with every episode's tools.

Usage:
  /usr/bin/python3 bench/peers/aiohttp_env_server.py --envs DIR [--host H] [--port P]
      [--port-file F] [--token T] [--max-sessions N]
"""

import argparse
import asyncio
import itertools
import json
import os
import pathlib
import signal
import socket
import sqlite3
import sys
import time
import types

from aiohttp import WSMsgType, web

try:
    import jsonschema
except ImportError:  # validation is optional: the peer still serves without it
    jsonschema = None

# JSON-RPC error codes, as base/error_table.h defines them for envforge.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
UNKNOWN_SESSION = -32001
UNKNOWN_ENV = -32002
SERVER_FULL = -32003
SESSION_DEAD = -32004
INFRA_ERROR = -32007
ERROR_KINDS = {
    PARSE_ERROR: "parse_error", INVALID_REQUEST: "invalid_request",
    METHOD_NOT_FOUND: "method_not_found", INVALID_PARAMS: "invalid_params",
    INTERNAL_ERROR: "internal_error", UNKNOWN_SESSION: "unknown_session",
    UNKNOWN_ENV: "unknown_env", SERVER_FULL: "server_full", SESSION_DEAD: "session_dead",
    INFRA_ERROR: "infra_error",
}
RETRYABLE = {SERVER_FULL, INFRA_ERROR}
RESERVED_TABLES = ("_env", "_tools", "_tasks", "_files")
MAX_MESSAGE_BYTES = 64 << 20
SUBMIT_TOOL = "submit_result"

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class RpcError(Exception):
    """A JSON-RPC error answer; `data` is merged into error.data beside kind and retryable."""

    def __init__(self, code, message, **data):
        super().__init__(message)
        self.code = code
        self.data = data

    def to_json(self):
        data = {"kind": ERROR_KINDS.get(self.code, "error"), "retryable": self.code in RETRYABLE}
        if self.code == SERVER_FULL:
            data["retry_after_ms"] = 50
        data.update(self.data)
        return {"code": self.code, "message": str(self), "data": data}


def _describe(exc):
    text = str(exc)
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# The `db` object of tools and verifiers.

class Db:
    """db.query / db.execute / db.last_insert_rowid over one sqlite3 connection."""

    __slots__ = ("_conn",)

    def __init__(self, conn):
        self._conn = conn

    def query(self, sql, params=()):
        cursor = self._conn.execute(sql, params)
        if cursor.description is None:  # a statement that returns no rows
            return []
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row)) for row in cursor]

    def execute(self, sql, params=()):
        return self._conn.execute(sql, params).rowcount

    def last_insert_rowid(self):
        return self._conn.execute("SELECT last_insert_rowid()").fetchone()[0]


# ---------------------------------------------------------------------------------------------
# Environments (one bundle each) and sessions.

class Task:
    __slots__ = ("id", "prompt", "version", "verify", "problem")


class Environment:
    """A bundle loaded once: its tools module, compiled verifiers and the pristine data."""

    def __init__(self, path):
        bundle = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
        try:
            manifest = dict(bundle.execute("SELECT key, value FROM _env"))
            tool_rows = bundle.execute(
                "SELECT name, description, input_schema, builtin FROM _tools ORDER BY position").fetchall()
            task_rows = bundle.execute("SELECT id, prompt, verifier_source, version FROM _tasks ORDER BY id").fetchall()
            # The pristine copy holds the data tables only, as the worker's image does: tools
            # never see the reserved tables.
            self.pristine = sqlite3.connect(":memory:")
            bundle.backup(self.pristine)
        finally:
            bundle.close()
        for table in RESERVED_TABLES:
            self.pristine.execute("DROP TABLE IF EXISTS %s" % table)
        self.pristine.execute("VACUUM")
        self.id = manifest.get("content_hash", "")
        self.name = manifest.get("name", pathlib.Path(path).stem)
        self.manifest = manifest
        self.verifier_db = Db(self.new_connection(read_only=True))
        self.module = self._load_tools(manifest.get("tools_module", ""), path)
        self.specs = []
        self.functions = {}
        self.validators = {}
        for name, description, schema_text, builtin in tool_rows:
            schema = json.loads(schema_text)
            self.specs.append({"name": name, "description": description, "inputSchema": schema})
            if jsonschema is not None:
                self.validators[name] = jsonschema.validators.validator_for(schema)(schema)
            if not builtin:
                function = getattr(self.module, name, None)
                if not callable(function):
                    raise ValueError("%s: tool %r is not a function of the tools module" % (path, name))
                self.functions[name] = function
        self.tasks = {row[0]: self._load_task(*row) for row in task_rows}

    @staticmethod
    def _load_tools(source, path):
        module = types.ModuleType("tools")
        module.__file__ = "tools.py"
        module.db = None  # set to the calling session's Db before every call
        exec(compile(source, "%s:tools.py" % path, "exec"), module.__dict__)
        return module

    @staticmethod
    def _load_task(task_id, prompt, verifier_source, version):
        task = Task()
        task.id, task.prompt, task.version = task_id, prompt, version
        task.verify, task.problem = None, None
        namespace = {"__name__": "verifier"}
        try:
            exec(compile(verifier_source, "tasks/%s/verifier.py" % task_id, "exec"), namespace)
            task.verify = namespace.get("verify")
            if not callable(task.verify):
                task.problem = "the verifier does not define verify(answer, db)"
        except Exception as exc:  # reported at submit, like envforge's judge does
            task.problem = "the verifier raised %s while loading" % _describe(exc)
        return task

    def new_connection(self, read_only=False):
        conn = sqlite3.connect(":memory:")
        self.pristine.backup(conn)
        if read_only:
            conn.execute("PRAGMA query_only=1")
        return conn

    def summary(self):
        return {"id": self.id, "name": self.name, "kind": self.manifest.get("kind", "general"),
                "category": self.manifest.get("category", ""),
                "description": self.manifest.get("description", ""), "tasks": len(self.tasks),
                "version": self.id}

    def tasks_json(self):
        return [{"id": task.id, "prompt": task.prompt, "version": task.version} for task in self.tasks.values()]


class Session:
    __slots__ = ("handle", "env", "task", "conn", "db", "calls")

    def __init__(self, handle, env, task):
        self.handle, self.env, self.task = handle, env, task
        self.conn = env.new_connection()
        self.db = Db(self.conn)
        self.calls = 0


def _normalise_verdict(verdict):
    """{"passed", "score", "reasons"} from a verifier's bool or dict (runtime.py's rules)."""
    if isinstance(verdict, bool):
        return {"passed": verdict, "score": 1.0 if verdict else 0.0, "reasons": []}
    if not isinstance(verdict, dict) or not isinstance(verdict.get("passed"), bool):
        raise ValueError("the verifier returned %r; expected a bool or {\"passed\": bool, ...}" % (verdict,))
    passed = verdict["passed"]
    score = verdict.get("score")
    reasons = verdict.get("reasons") or []
    return {"passed": passed, "score": float(1.0 if passed else 0.0) if score is None else float(score),
            "reasons": [str(reason) for reason in reasons]}


# ---------------------------------------------------------------------------------------------
# The JSON-RPC service: transport-independent, synchronous (it runs on the event loop).

def _string_param(params, key, required=True):
    value = params.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise RpcError(INVALID_PARAMS, "params.%s is required (a string)" % key, field="params." + key)
    return value


class EnvService:
    def __init__(self, environments, max_sessions):
        self.envs = environments
        self.max_sessions = max_sessions
        self.sessions = {}
        self.handles = itertools.count(1)
        self.started = time.monotonic()
        self.calls = 0
        self.sessions_created = 0
        self.methods = {
            "ping": lambda params: {},
            "envs/list": self.envs_list,
            "envs/get": self.envs_get,
            "tasks/list": self.tasks_list,
            "session/create": self.session_create,
            "tools/list": self.tools_list,
            "tools/call": self.tools_call,
            "session/submit": self.session_submit,
            "session/close": self.session_close,
            "server/stats": self.server_stats,
        }

    # Messages --------------------------------------------------------------------------------

    def handle_text(self, text):
        """One JSON-RPC message (a request, a notification or a batch) -> the answer text or None."""
        try:
            message = json.loads(text)
        except ValueError as exc:
            return _dumps(self._error(None, RpcError(PARSE_ERROR, "parse error: %s" % exc)))
        if isinstance(message, list):
            if not message:
                return _dumps(self._error(None, RpcError(INVALID_REQUEST, "an empty batch")))
            answers = [answer for answer in map(self._handle_one, message) if answer is not None]
            return "[" + ",".join(answers) + "]" if answers else None
        return self._handle_one(message)

    def _handle_one(self, request):
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" \
                or not isinstance(request.get("method"), str):
            return _dumps(self._error(None, RpcError(INVALID_REQUEST, "not a JSON-RPC 2.0 request")))
        notification = "id" not in request
        request_id = request.get("id")
        method = self.methods.get(request["method"])
        params = request.get("params", {})
        try:
            if method is None:
                raise RpcError(METHOD_NOT_FOUND, "unknown method %r" % request["method"])
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params must be an object")
            result = method(params)
        except RpcError as error:
            return None if notification else _dumps(self._error(request_id, error))
        except Exception as exc:  # a bug here, not the caller's fault: answer it, keep serving
            error = RpcError(INTERNAL_ERROR, "internal error: %s" % _describe(exc))
            return None if notification else _dumps(self._error(request_id, error))
        if notification:
            return None
        try:
            return _dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
        except (TypeError, ValueError) as exc:
            # Only a tool's content can be something JSON cannot encode: then it is the tool's fault.
            # Encoding once and catching here keeps the usual path at one encode per answer.
            if request["method"] != "tools/call":
                return _dumps(self._error(request_id, RpcError(INTERNAL_ERROR, _describe(exc))))
            result = self._tool_result(result["id"], "tool_error",
                                       message="the tool returned a value that is not JSON-serialisable: %s"
                                       % _describe(exc))
            return _dumps({"jsonrpc": "2.0", "id": request_id, "result": result})

    @staticmethod
    def _error(request_id, error):
        return {"jsonrpc": "2.0", "id": request_id, "error": error.to_json()}

    # Environments ----------------------------------------------------------------------------

    def _resolve(self, params):
        key = _string_param(params, "env")
        for env in self.envs:
            if key in (env.name, env.id):
                return env
        matches = [env for env in self.envs if env.id.startswith(key)]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(env.name for env in self.envs) or "none"
        raise RpcError(UNKNOWN_ENV, "unknown environment '%s' (known: %s)" % (key, known), field="params.env")

    def envs_list(self, params):
        return {"envs": [env.summary() for env in self.envs]}

    def envs_get(self, params):
        env = self._resolve(params)
        described = env.summary()
        del described["tasks"]
        described.update(tools=env.specs, tasks=env.tasks_json())
        return described

    def tasks_list(self, params):
        return {"tasks": self._resolve(params).tasks_json()}

    # Sessions --------------------------------------------------------------------------------

    def session_create(self, params):
        env = self._resolve(params)
        task_id = _string_param(params, "task", required=False)
        task = env.tasks.get(task_id) if task_id else None
        if task_id and task is None:
            raise RpcError(UNKNOWN_ENV, "unknown task '%s' in environment '%s' (tasks: %s)"
                           % (task_id, env.name, ", ".join(env.tasks)), field="params.task")
        if len(self.sessions) >= self.max_sessions:
            raise RpcError(SERVER_FULL, "the server holds %d sessions (--max-sessions)" % len(self.sessions))
        handle = "p%d" % next(self.handles)
        self.sessions[handle] = Session(handle, env, task)
        self.sessions_created += 1
        created = {"session": handle, "env": {"id": env.id, "name": env.name},
                   "task": task.id if task else None, "prompt": task.prompt if task else None,
                   "versions": {"env": env.id, "verifier": task.version if task else None},
                   "trajectory": None}
        if params.get("tools") is not False:  # envforge's session/create: tools false leaves them out
            created["tools"] = env.specs
        return created

    def _session(self, params):
        handle = _string_param(params, "session")
        session = self.sessions.get(handle)
        if session is None:
            raise RpcError(UNKNOWN_SESSION, "unknown session '%s' (closed or never created)" % handle)
        return session

    def tools_list(self, params):
        if params.get("session") is not None:
            return {"tools": self._session(params).env.specs}
        return {"tools": self._resolve(params).specs}

    def session_close(self, params):
        session = self.sessions.pop(_string_param(params, "session"), None)
        if session is None:
            raise RpcError(UNKNOWN_SESSION, "unknown session '%s'" % params["session"])
        session.conn.close()
        return {"closed": True, "session": session.handle}

    def server_stats(self, params):
        return {"live_sessions": len(self.sessions), "sessions_created": self.sessions_created,
                "calls": self.calls, "envs": len(self.envs), "in_flight": 1,
                "uptime_s": round(time.monotonic() - self.started, 3)}

    # Tool calls and verdicts -----------------------------------------------------------------

    @staticmethod
    def _tool_result(call_id, outcome, content=None, message="", started=None):
        result = {"id": call_id, "outcome": outcome}
        if outcome == "ok":
            result["content"] = content
        if message:
            result["message"] = message
        result["session_alive"] = True
        result["duration_us"] = (time.perf_counter() - started) * 1e6 if started else 0.0
        return result

    def tools_call(self, params):
        session = self._session(params)
        name = _string_param(params, "name")
        call_id = _string_param(params, "id", required=False)
        arguments = params.get("arguments", {})
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, "params.arguments must be an object", field="params.arguments")
        started = time.perf_counter()
        session.calls += 1
        self.calls += 1
        env = session.env
        if name not in env.functions and name != SUBMIT_TOOL:
            return self._tool_result(call_id, "invalid_call", message="unknown tool '%s'; tools: %s"
                                     % (name, ", ".join(spec["name"] for spec in env.specs)))
        validator = env.validators.get(name)
        if validator is not None:
            problem = next(validator.iter_errors(arguments), None)
            if problem is not None:
                return self._tool_result(call_id, "invalid_call", message=problem.message)
        if name == SUBMIT_TOOL:
            verdict = self._verdict(session, arguments.get("answer_text", ""))
            if "defect" in verdict:
                return self._tool_result(call_id, "infra_error", message=verdict["defect"], started=started)
            return self._tool_result(call_id, "ok", verdict, started=started)
        # One module serves every session: point its `db` global at this session's copy. Safe
        # because the loop runs one call at a time.
        env.module.db = session.db
        try:
            content = env.functions[name](**arguments)
        except Exception as exc:
            return self._tool_result(call_id, "tool_error", message=_describe(exc), started=started)
        return self._tool_result(call_id, "ok", content, started=started)

    def session_submit(self, params):
        session = self._session(params)
        if "answer" not in params:
            raise RpcError(INVALID_PARAMS, "params.answer is required (the answer text)", field="params.answer")
        answer = params["answer"]
        text = answer if isinstance(answer, str) else _dumps(answer)
        session.calls += 1
        detail = {"outcome": "invalid_call", "session_alive": True}
        if session.task is None:
            raise RpcError(INVALID_PARAMS, "submit rejected: this session has no task", **detail)
        verdict = self._verdict(session, text)
        if "defect" in verdict:
            detail["outcome"] = "infra_error"
            raise RpcError(INFRA_ERROR, "the verdict could not be computed: " + verdict["defect"], **detail)
        verdict["outcome"] = "ok"
        return verdict

    def _verdict(self, session, text):
        """The task's verifier on one answer text: a verdict, or {"defect": why}."""
        task = session.task
        if task is None:
            return {"defect": "this session has no task"}
        if task.problem:
            return {"defect": task.problem}
        try:
            answer = json.loads(text)
        except (ValueError, RecursionError):
            answer = text
        try:
            verdict = _normalise_verdict(task.verify(answer, session.env.verifier_db))
        except Exception as exc:
            return {"defect": "the verifier of task %r raised %s" % (task.id, _describe(exc))}
        verdict["verifier_version"] = task.version
        return verdict


# ---------------------------------------------------------------------------------------------
# Transports (aiohttp): POST /rpc, GET /ws, GET /health.

def make_app(service, token):
    expected = "Bearer " + token if token else None

    def authorized(request):
        return expected is None or request.headers.get("Authorization") == expected

    def unauthorized():
        error = RpcError(-32005, "unauthorized: send Authorization: Bearer <token>").to_json()
        error["data"]["kind"] = "unauthorized"
        return web.Response(status=401, text=_dumps({"jsonrpc": "2.0", "id": None, "error": error}),
                            content_type="application/json", headers={"WWW-Authenticate": "Bearer"})

    async def rpc(request):
        if not authorized(request):
            return unauthorized()
        answer = service.handle_text(await request.text())
        if answer is None:
            return web.Response(status=204)
        return web.Response(text=answer, content_type="application/json")

    async def ws(request):
        if not authorized(request):
            return unauthorized()
        socket_ = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES)
        await socket_.prepare(request)
        async for message in socket_:
            if message.type == WSMsgType.TEXT:
                answer = service.handle_text(message.data)
                if answer is not None:
                    await socket_.send_str(answer)
            elif message.type == WSMsgType.ERROR:
                break
        return socket_

    async def health(request):
        return web.json_response({"status": "ok", "sessions": len(service.sessions)})

    app = web.Application(client_max_size=MAX_MESSAGE_BYTES)
    app.add_routes([web.post("/rpc", rpc), web.get("/ws", ws), web.get("/health", health)])
    return app


def load_environments(directory):
    paths = sorted(pathlib.Path(directory).glob("*.envdb"))
    if not paths:
        raise SystemExit("aiohttp_env_server: no *.envdb in %s" % directory)
    return [Environment(str(path)) for path in paths]


def write_port_file(path, port):
    # Written whole and renamed into place: a reader polling for the file never sees half of it.
    temporary = path + ".tmp"
    with open(temporary, "w") as out:
        out.write("%d\n" % port)
    os.replace(temporary, path)


async def serve(args):
    service = EnvService(load_environments(args.envs), args.max_sessions)
    # Our own listening socket: with --port 0 the kernel picks the port, and we can read it back.
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.port))
    listener.listen(1024)
    port = listener.getsockname()[1]
    runner = web.AppRunner(make_app(service, args.token), access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, listener, shutdown_timeout=1.0).start()
    stop = asyncio.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signal_number, stop.set)
    names = ", ".join("%s (%d tasks)" % (env.name, len(env.tasks)) for env in service.envs)
    print("aiohttp_env_server: listening on http://%s:%d (POST /rpc, GET /ws); %s; argument validation %s"
          % (args.host, port, names, "on (jsonschema)" if jsonschema else "off (no jsonschema)"),
          file=sys.stderr, flush=True)
    if args.port_file:
        write_port_file(args.port_file, port)
    await stop.wait()
    await runner.cleanup()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", required=True, help="directory of *.envdb bundles")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8090, help="port; 0 picks a free one (default: 8090)")
    parser.add_argument("--port-file", help="write the bound port to this file once listening")
    parser.add_argument("--token", default=os.environ.get("ENVFORGE_SERVE_TOKEN", ""),
                        help="bearer token every request must carry (default: ENVFORGE_SERVE_TOKEN, else none)")
    parser.add_argument("--max-sessions", type=int, default=10000,
                        help="open sessions at most; session/create answers -32003 above (default: 10000)")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
