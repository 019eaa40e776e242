"""The minik8s function runtime: one HTTP server per function instance.

The serverless gateway sends each call as `POST /` with the event (JSON) as the
body; the answer is the handler's result as JSON. `GET /healthz` is the pod's
readiness probe. Standard library only: the image is Debian's python3 and this
file (scripts/images.sh builds minik8s/function-runtime).

    FUNCTION_RUNTIME  python: `def handler(event)` in FUNCTION_SOURCE, called per request
                      shell:  `sh FUNCTION_SOURCE`, the event on stdin and in $EVENT;
                              stdout is the result (JSON if it parses, else a string)
    FUNCTION_HANDLER  the Python function's name (default handler)
    FUNCTION_TIMEOUT  seconds a shell call may run (default 30)

A failing call answers 500 with {"error": ..., "traceback": ...}. SIGTERM stops
accepting calls and exits once the calls in flight have answered, so a rolling
update or a scale-down never cuts one.
"""

import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RUNTIME = os.environ.get("FUNCTION_RUNTIME", "python")
SOURCE = os.environ.get("FUNCTION_SOURCE", "/function/source")
HANDLER = os.environ.get("FUNCTION_HANDLER", "handler")
TIMEOUT = float(os.environ.get("FUNCTION_TIMEOUT", "30"))
PORT = int(os.environ.get("PORT", "8080"))


def load_python():
    # The source file has no .py suffix (a ConfigMap key), so name the loader.
    loader = importlib.machinery.SourceFileLoader("function", SOURCE)
    spec = importlib.util.spec_from_loader("function", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    handler = getattr(module, HANDLER, None)
    if not callable(handler):
        raise AttributeError(f"{SOURCE} defines no function {HANDLER!r}")
    return handler


def call_shell(body):
    env = dict(os.environ, EVENT=body.decode("utf-8", "replace"))
    done = subprocess.run(["sh", SOURCE], input=body, env=env, capture_output=True, timeout=TIMEOUT)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        raise RuntimeError(message)
    out = done.stdout.decode("utf-8", "replace").strip()
    try:
        return json.loads(out)
    except ValueError:
        return out


FUNCTION = None
# Calls being answered: SIGTERM waits for these, not for idle keep-alive connections.
IN_FLIGHT = 0
IDLE = threading.Condition()


def event_of(body):
    """The event: the body as JSON, or as text when it is not JSON."""
    text = body.decode("utf-8", "replace")
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except ValueError:
        return text


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The headers and the body are two writes: with Nagle's algorithm the
    # body waits for the caller's delayed ACK of the headers (40 ms a call).
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def reply(self, code, value):
        body = json.dumps(value).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/healthz":
            self.reply(200, "ok")
        else:
            self.call(b"")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.call(self.rfile.read(length) if length else b"")

    def call(self, body):
        global IN_FLIGHT
        with IDLE:
            IN_FLIGHT += 1
        try:
            self.answer(body)
        finally:
            with IDLE:
                IN_FLIGHT -= 1
                IDLE.notify_all()

    def answer(self, body):
        try:
            if RUNTIME == "shell":
                result = call_shell(body)
            else:
                result = FUNCTION(event_of(body))
            self.reply(200, result)
        except Exception as e:  # the caller gets the function's error, not a dead connection
            self.reply(500, {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()})


class Server(ThreadingHTTPServer):
    # socketserver's listen backlog is 5: a burst of new connections (40
    # callers, or the gateway opening its pool) would be refused.
    request_queue_size = 128


def main():
    global FUNCTION
    if RUNTIME == "python":
        try:
            FUNCTION = load_python()
        except Exception:
            # The pod's log and termination message say why; the controller
            # reports syntax errors on the Function before any pod runs.
            message = traceback.format_exc()
            sys.stderr.write(message)
            try:
                with open("/dev/termination-log", "w") as f:
                    f.write(message[-4000:])
            except OSError:
                pass
            sys.exit(1)
    server = Server(("", PORT), Handler)
    # Connection threads are daemons: an idle keep-alive connection (the
    # gateway pools them) must not hold the exit.
    server.daemon_threads = True
    # SIGTERM: stop accepting, answer the calls in flight, exit.
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    print(f"function runtime ({RUNTIME}) serving {SOURCE} on :{PORT}", flush=True)
    server.serve_forever()
    server.socket.close()
    with IDLE:
        IDLE.wait_for(lambda: IN_FLIGHT == 0)


if __name__ == "__main__":
    main()
