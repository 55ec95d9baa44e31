"""A small OpenAI-compatible server for tests/inference/openai_backend_test.cc.

Usage: openai_test_server.py PORT_FILE   (listens on 127.0.0.1, an ephemeral port written to PORT_FILE)

The request's "model" field picks the behaviour: "MODE" or "MODE/KEY", where KEY separates the
counters of different test cases. GET /stats/MODEL answers {"attempts", "max_concurrent"} for that
model string. Modes:
  echo       every choice's content is JSON {"index", "body", "authorization", "path"}: the request
             as received (raw /completions: text "echo:" + prompt)
  tools      reasoning + two tool calls, the second with arguments that are not valid JSON
  logprobs   content "Hi!" with per-token logprobs and top_logprobs
  retry429   the first attempt gets 429 with Retry-After: 1, later ones echo
  flaky500   the first two attempts get 500, later ones echo
  down500    always 500
  garbage    200 with a body that is not JSON
  noarray | nomessage | badtypes   200 with JSON of the wrong shape
  slow       answers after 3 s
  bad400     400 with an OpenAI error body
  toolong    400 saying the prompt exceeds the context length (vLLM's wording)
  stream     two canned choices (reasoning, content, two tool calls); with "stream": true sent as
             server-sent events split into small pieces, else as one body
  streamcut  a stream that stops before its finish_reason and [DONE]
  slowcount  answers after 0.5 s, counting requests in flight at once
Only the failure modes are canned; echo reflects what the client sent.
"""

import http.server
import json
import os
import sys
import threading
import time

LOCK = threading.Lock()
ATTEMPTS = {}
IN_FLIGHT = {}
MAX_CONCURRENT = {}

ERROR_400 = {"error": {"message": "The model `bad400` does not exist.", "type": "invalid_request_error",
                       "param": None, "code": "model_not_found"}}

STREAM_CHOICES = [
    {"reasoning": "Let me think about the weather.", "content": "Hello there, traveller!",
     "tool_calls": [("call_w1", "weather", '{"city": "Paris", "days": 3}'),
                    ("call_w2", "book", '{"hotel": 7}')],
     "finish_reason": "tool_calls"},
    {"reasoning": "", "content": "Second choice here.", "tool_calls": [], "finish_reason": "stop"},
]
STREAM_USAGE = {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}


def pieces(text, size=4):
    return [text[i:i + size] for i in range(0, len(text), size)]


def completion(model, choices, usage=None):
    return {"id": "cmpl-test", "object": "chat.completion", "created": 0, "model": model, "choices": choices,
            "usage": usage or {"prompt_tokens": 7, "completion_tokens": 3 * len(choices), "total_tokens": 7 + 3 * len(choices)}}


def echo(handler, body, model):
    n = int(body.get("n", 1))
    if handler.path.endswith("/chat/completions"):
        choices = [{"index": i, "finish_reason": "stop", "logprobs": None,
                    "message": {"role": "assistant", "content": json.dumps({
                        "index": i, "body": body, "path": handler.path,
                        "authorization": handler.headers.get("Authorization")})}} for i in range(n)]
    else:
        choices = [{"index": i, "text": "echo:" + body.get("prompt", ""), "finish_reason": "length"} for i in range(n)]
    return 200, completion(model, choices)


def canned_stream_response(model):
    choices = []
    for index, spec in enumerate(STREAM_CHOICES):
        message = {"role": "assistant", "content": spec["content"]}
        if spec["reasoning"]:
            message["reasoning_content"] = spec["reasoning"]
        if spec["tool_calls"]:
            message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                     for i, n, a in spec["tool_calls"]]
        choices.append({"index": index, "message": message, "finish_reason": spec["finish_reason"]})
    return completion(model, choices, STREAM_USAGE)


def stream_chunks(model, cut=False):
    """The canned choices as chat.completion.chunk objects, the choices' pieces interleaved."""
    def chunk(choices, usage=None):
        out = {"id": "cmpl-test", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": choices}
        if usage is not None:
            out["usage"] = usage
        return out

    per_choice = []
    for index, spec in enumerate(STREAM_CHOICES):
        deltas = [{"role": "assistant"}]
        deltas += [{"reasoning_content": p} for p in pieces(spec["reasoning"])]
        deltas += [{"content": p} for p in pieces(spec["content"])]
        for call_index, (call_id, name, arguments) in enumerate(spec["tool_calls"]):
            deltas.append({"tool_calls": [{"index": call_index, "id": call_id, "type": "function",
                                           "function": {"name": name, "arguments": ""}}]})
            deltas += [{"tool_calls": [{"index": call_index, "function": {"arguments": p}}]} for p in pieces(arguments, 5)]
        per_choice.append([{"index": index, "delta": d, "finish_reason": None} for d in deltas])
    out = []
    for step in range(max(len(c) for c in per_choice)):
        out += [chunk([c[step]]) for c in per_choice if step < len(c)]
    if cut:
        return out[:len(out) // 2]
    out += [chunk([{"index": i, "delta": {}, "finish_reason": s["finish_reason"]}]) for i, s in enumerate(STREAM_CHOICES)]
    out.append(chunk([], STREAM_USAGE))
    return out


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_json(self, status, payload, headers=None):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if not isinstance(payload, bytes) else "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, chunks, done=True):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for c in chunks:
            self.wfile.write(b"data: " + json.dumps(c).encode() + b"\n\n")
            self.wfile.flush()
        if done:
            self.wfile.write(b"data: [DONE]\n\n")

    def do_GET(self):
        if not self.path.startswith("/stats/"):
            return self.send_json(404, {"error": {"message": "no such path"}})
        model = self.path[len("/stats/"):]
        with LOCK:
            self.send_json(200, {"attempts": ATTEMPTS.get(model, 0), "max_concurrent": MAX_CONCURRENT.get(model, 0)})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        model = body.get("model", "")
        mode = model.split("/")[0]
        with LOCK:
            ATTEMPTS[model] = attempt = ATTEMPTS.get(model, 0) + 1
            IN_FLIGHT[model] = IN_FLIGHT.get(model, 0) + 1
            MAX_CONCURRENT[model] = max(MAX_CONCURRENT.get(model, 0), IN_FLIGHT[model])
        try:
            self.answer(mode, model, body, attempt)
        finally:
            with LOCK:
                IN_FLIGHT[model] -= 1

    def answer(self, mode, model, body, attempt):
        if mode == "tools":
            message = {"role": "assistant", "content": None, "reasoning_content": "I should look it up.",
                       "tool_calls": [
                           {"id": "call_a", "type": "function", "function": {"name": "search", "arguments": '{"q": "hotels", "limit": 3}'}},
                           {"id": "call_b", "type": "function", "function": {"name": "book", "arguments": '{"hotel": 7,'}}]}
            return self.send_json(200, completion(model, [{"index": 0, "message": message, "finish_reason": "tool_calls"}]))
        if mode == "logprobs":
            content = [{"token": "Hi", "logprob": -0.25, "top_logprobs": [{"token": "Hi", "logprob": -0.25}, {"token": "Hello", "logprob": -1.5}]},
                       {"token": "!", "logprob": -0.5, "top_logprobs": [{"token": "!", "logprob": -0.5}, {"token": ".", "logprob": -1.0}]}]
            choice = {"index": 0, "message": {"role": "assistant", "content": "Hi!"}, "logprobs": {"content": content}, "finish_reason": "stop"}
            return self.send_json(200, completion(model, [choice]))
        if mode == "retry429" and attempt == 1:
            return self.send_json(429, {"error": {"message": "rate limited", "type": "rate_limit"}}, {"Retry-After": "1"})
        if (mode == "flaky500" and attempt <= 2) or mode == "down500":
            return self.send_json(500, {"error": {"message": "server overloaded", "type": "server_error"}})
        if mode == "garbage":
            return self.send_json(200, b"<html>this is not json</html>")
        if mode == "noarray":
            return self.send_json(200, {"id": "x", "choices": "nope"})
        if mode == "nomessage":
            return self.send_json(200, {"choices": [{"index": 0, "finish_reason": "stop"}]})
        if mode == "badtypes":
            return self.send_json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": 5}}]})
        if mode == "bad400":
            return self.send_json(400, ERROR_400)
        if mode == "toolong":
            return self.send_json(400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, you "
                                                              "requested 5000 tokens. Please reduce the length of the messages.",
                                                  "type": "BadRequestError", "param": None, "code": 400}})
        if mode in ("stream", "streamcut"):
            if body.get("stream"):
                return self.send_events(stream_chunks(model, cut=mode == "streamcut"), done=mode == "stream")
            return self.send_json(200, canned_stream_response(model))
        if mode == "slow":
            time.sleep(3)
        if mode == "slowcount":
            time.sleep(0.5)
        status, payload = echo(self, body, model)
        self.send_json(status, payload)


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    with open(sys.argv[1] + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
