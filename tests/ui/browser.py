#!/usr/bin/env python3
"""Drives Debian's headless Chromium through the DevTools protocol for the
web view's tests: a list of steps (JSON on stdin), run in one browser whose
profile (cookies) lives in --profile, screenshots kept where the steps say.

Steps:
  {"open": URL, "until": JS, "screenshot": PATH}   navigate, wait for JS to be truthy
  {"hash": "#...", "until": JS, "screenshot": PATH, "within": S, "since": MARK,
   "watch": JS}                                     each new value of JS, timed, in values[name + ".seen"]
  {"run": "shell command"}                          e.g. create a pod
  {"mark": NAME}                                    remember the time (for "since")
  {"eval": JS, "as": NAME}                          JS's value goes into the result
Prints {"values": {NAME: value}, "elapsed": {step: seconds}} as JSON; exits 1
(with the page's text, a screenshot, the values so far and the marks' times)
when a wait runs out or is late.

Needs the `websocket` module (websocket-client, which the official
Kubernetes Python client installs).
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket


class Page:
    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=30, suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            return None
        return r.get("result", {}).get("value")

    def screenshot(self, path):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        # The window's view only: beyond it, headless Chromium waits about
        # 5 s for a frame of the resized page (the window is tall instead).
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def wait(self, until, timeout, watch=None, since=None, seen=None):
        """Waits for `until`; each new value of `watch` goes into `seen`
        with its time since `since` (what the page showed when)."""
        deadline = time.time() + timeout
        last = object()
        while time.time() < deadline:
            if watch is not None:
                value = self.eval(watch)
                if value != last:
                    seen.append([round(time.time() - since, 3), value])
                    last = value
            if until is None or self.eval(f"!!({until})"):
                return True
            time.sleep(0.1)
        return False


def start_browser(profile):
    cmd = [
        os.environ.get("CHROMIUM", "chromium"), "--headless=new", "--no-sandbox", "--disable-gpu",
        "--ignore-certificate-errors", "--no-first-run", "--window-size=1280,1600",
        f"--user-data-dir={profile}", "--remote-debugging-port=0", "about:blank",
    ]
    port_file = os.path.join(profile, "DevToolsActivePort")
    if os.path.exists(port_file):
        os.remove(port_file)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        if os.path.exists(port_file):
            lines = open(port_file).read().split()
            if lines:
                port = lines[0]
                targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
                pages = [t for t in targets if t.get("type") == "page"]
                if pages:
                    return proc, pages[0]["webSocketDebuggerUrl"]
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited with {proc.returncode}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("chromium did not open its DevTools port")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default=None, help="the browser profile (its cookies) to use and keep")
    ap.add_argument("--timeout", type=float, default=20)
    args = ap.parse_args()
    steps = json.load(sys.stdin)
    profile = args.profile or tempfile.mkdtemp(prefix="minik8s-browser-")
    os.makedirs(profile, exist_ok=True)
    proc, ws_url = start_browser(profile)
    values, elapsed, marks = {}, {}, {}
    page = Page(ws_url)
    try:
        page.call("Page.enable")
        page.call("Runtime.enable")
        for i, step in enumerate(steps):
            started = time.time()
            if "open" in step:
                page.call("Page.navigate", url=step["open"])
            elif "hash" in step:
                page.eval(f"location.hash = {json.dumps(step['hash'])}")
            elif "run" in step:
                out = subprocess.run(step["run"], shell=True, capture_output=True, text=True)
                if out.returncode != 0:
                    raise RuntimeError(f"{step['run']}: {out.stdout}{out.stderr}")
            elif "mark" in step:
                marks[step["mark"]] = time.time()
            if "eval" in step:
                values[step.get("as", f"step{i}")] = page.eval(step["eval"])
            if "until" in step:
                since = marks.get(step.get("since"), started)
                seen = []
                ok = page.wait(step["until"], step.get("timeout", args.timeout),
                               step.get("watch"), since, seen)
                if step.get("watch") is not None:
                    values[step.get("name", f"step{i}") + ".seen"] = seen
                # Timed when the page showed it, not after the screenshot.
                took = time.time() - since
                elapsed[step.get("name", f"step{i}")] = round(took, 3)
                if step.get("screenshot"):
                    shot_started = time.time()
                    page.screenshot(step["screenshot"])
                    elapsed[step.get("name", f"step{i}") + ".screenshot"] = round(time.time() - shot_started, 3)
                if not ok:
                    text = page.eval("document.body ? document.body.innerText : ''")
                    print(json.dumps({"failed": step, "page": text, "values": values, "marks": marks}), flush=True)
                    return 1
                within = step.get("within")
                if within is not None and took > within:
                    print(json.dumps({"late": step, "seconds": round(took, 3), "elapsed": elapsed,
                                      "values": values, "marks": marks}), flush=True)
                    return 1
            elif step.get("screenshot"):
                page.screenshot(step["screenshot"])
        print(json.dumps({"values": values, "elapsed": elapsed}), flush=True)
        return 0
    finally:
        try:
            page.ws.close()
        except Exception:
            pass
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    sys.exit(main())
