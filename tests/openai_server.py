"""A small OpenAI-compatible HTTP server on 127.0.0.1 for tests.

It serves ``/v1/chat/completions`` from a :class:`fakes.ScriptedFakeModel` (so answers come
from the prompt), or, with ``upstream=URL``, proxies to a real server (the embedded
llama.cpp one), and can inject faults before answering: ``faults`` is a list consumed one per
request, each ``None`` (answer normally) or a dict like ``{"status": 429, "retry_after": "0"}``,
``{"sleep": 2.0}`` or ``{"reject_response_format": True}``. Every request body is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fakes import ScriptedFakeModel


class FakeOpenAIServer:
    KINDS = ("429", "500", "503", "reset", "timeout", "truncated", "empty", "prose")

    def __init__(
        self,
        model: ScriptedFakeModel | None = None,
        *,
        faults=None,
        cached_style: str = "openai",
        fault_rate: float = 0.0,
        fault_kinds: tuple[str, ...] = KINDS,
        seed: int = 0,
        timeout_sleep: float = 1.0,
        upstream: str | None = None,
    ) -> None:
        import random

        self.model = model or ScriptedFakeModel()
        self.upstream = upstream  # proxy mode: forward healthy requests to a real server
        self.faults = list(faults or [])
        self.fault_rate = fault_rate
        self.fault_kinds = fault_kinds
        self.rng = random.Random(seed)
        self.timeout_sleep = timeout_sleep
        self.injected: list[str] = []
        self.completed = 0
        self.cached_style = cached_style  # "openai" (prompt_tokens_details) or "llamacpp"
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):
                self._send(200, {"status": "ok"})

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.headers.append(dict(self.headers))
                    fault = server.faults.pop(0) if server.faults else None
                    if (
                        fault is None
                        and server.fault_rate
                        and (server.rng.random() < server.fault_rate)
                    ):
                        kind = server.rng.choice(server.fault_kinds)
                        server.injected.append(kind)
                        fault = {"kind": kind}
                kind = (fault or {}).get("kind")
                if kind in ("429", "500", "503"):
                    extra = {"Retry-After": "0"} if kind == "429" else {}
                    self._send(int(kind), {"error": {"message": "injected"}}, extra)
                    return
                if kind == "reset":
                    import socket
                    import struct

                    # RST instead of FIN: the client sees a connection reset
                    self.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    self.connection.close()
                    return
                if kind == "timeout":
                    time.sleep(server.timeout_sleep)
                    return
                if kind == "truncated":
                    data = b'{"id": "x", "choices": [{"message": {"content": "The'
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                if fault:
                    if fault.get("sleep"):
                        time.sleep(fault["sleep"])
                    if fault.get("status"):
                        extra = {}
                        if "retry_after" in fault:
                            extra["Retry-After"] = fault["retry_after"]
                        self._send(fault["status"], {"error": {"message": "injected fault"}}, extra)
                        return
                    if fault.get("reject_response_format") and "response_format" in body:
                        self._send(400, {"error": {"message": "response_format not supported"}})
                        return
                if server.upstream and kind not in ("empty", "prose"):
                    import urllib.request

                    req = urllib.request.Request(
                        server.upstream.rstrip("/") + "/chat/completions",
                        data=json.dumps(body).encode(),
                        headers={"content-type": "application/json"},
                    )
                    with urllib.request.urlopen(req, timeout=600) as resp:
                        reply = json.loads(resp.read())
                    with server._lock:
                        server.completed += 1
                    self._send(200, reply)
                    return
                schema = (body.get("response_format") or {}).get("json_schema")
                text = server.model.respond(body["messages"], schema)
                if kind == "empty":
                    text = ""
                elif kind == "prose":
                    text = "Sure! I would be happy to help with that document."
                with server._lock:
                    server.completed += 1  # a 200 with a full body: the client pays for it
                usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
                reply = {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "fake"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": text},
                        }
                    ],
                    "usage": usage,
                }
                if server.cached_style == "openai":
                    usage["prompt_tokens_details"] = {"cached_tokens": 40}
                else:
                    reply["timings"] = {"cache_n": 60, "prompt_n": 40}
                self._send(200, reply)

            def _send(self, status, payload, extra_headers=None):
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for k, v in (extra_headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
