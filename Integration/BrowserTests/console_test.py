#!/usr/bin/env python3
"""The web console as a person uses it, in a real headless Chromium (`make test-browser`).

Against a live `queuekit work` on an SQLite file, it loads `queuekit serve`'s queues page, sees
the counts change through server-sent events (with a heartbeat of ten minutes: each update comes
from the database's change notifications, the worker's completions included), clicks a queue's Pause button, and sees that queue
stop while the other goes on; it takes a screenshot of the queues page at the end.

Usage: console_test.py QUEUEKIT_BINARY SCREENSHOT_PNG

Chromium is driven through the DevTools protocol (websocket-client, from PyPI). Every wait is for
an event: a page load, or a promise in the page that a MutationObserver resolves when a count
changes; each has a deadline so that a broken console fails instead of hanging.
"""
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

import websocket

DEADLINE_SECONDS = 60


class Failure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise Failure(message)


class DevTools:
    """One page target over the DevTools protocol: calls, and the events they cause."""

    def __init__(self, url):
        self.socket = websocket.create_connection(url, timeout=DEADLINE_SECONDS, suppress_origin=True)
        self.next_id = 0
        self.events = []

    def call(self, method, **params):
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise Failure(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method):
        for index, event in enumerate(self.events):
            if event["method"] == method:
                del self.events[index]
                return event
        while True:
            message = json.loads(self.socket.recv())
            if message.get("method") == method:
                return message
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression):
        """The value of `expression` (awaited when it is a promise)."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise Failure(f"in the page: {result['exceptionDetails'].get('exception', {}).get('description', result['exceptionDetails'])}")
        return result["result"].get("value")

    def load(self, url):
        self.events = [event for event in self.events if event["method"] != "Page.loadEventFired"]
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")


# A promise that resolves with the element's new text once it differs from `before` (a
# MutationObserver: no polling), or rejects after the deadline.
CHANGE = """
new Promise(function (resolve, reject) {
  var element = document.querySelector(%(selector)s);
  if (!element) { reject(new Error("no element " + %(selector)s)); return; }
  var before = %(before)s;
  if (element.textContent !== before) { resolve(element.textContent); return; }
  var observer = new MutationObserver(function () {
    if (element.textContent !== before) { observer.disconnect(); resolve(element.textContent); }
  });
  observer.observe(element, { childList: true, characterData: true, subtree: true });
  setTimeout(function () { observer.disconnect(); reject(new Error(%(selector)s + " did not change from " + before)); }, %(ms)d);
})
"""


# Waits until every chart image has loaded (a reload may be under way), then gives their widths.
CHARTS = """new Promise(function (resolve) {
  var deadline = Date.now() + %(ms)d;
  (function poll() {
    var images = Array.from(document.querySelectorAll("img[data-chart]"));
    var done = images.length > 0 && images.every(function (image) { return image.complete; });
    if (done || Date.now() > deadline) {
      resolve(images.map(function (image) { return image.complete ? image.naturalWidth : -1; }));
    } else {
      setTimeout(poll, 50);
    }
  })();
})"""


def changed(page, selector, before):
    return page.evaluate(CHANGE % {"selector": json.dumps(selector), "before": json.dumps(before), "ms": DEADLINE_SECONDS * 1000})


def text(page, selector):
    return page.evaluate(f"document.querySelector({json.dumps(selector)}).textContent")


def number(value):
    return int(value.replace(",", ""))


def main():
    queuekit, screenshot = sys.argv[1], os.path.abspath(sys.argv[2])
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    check(chromium is not None, "chromium is not installed (make test-browser installs Debian's chromium)")
    folder = tempfile.mkdtemp(prefix="queuekit-browser-")
    database = ["--database", f"sqlite:{folder}/console.sqlite"]
    processes = []
    try:
        for user in ("alice", "bob"):
            subprocess.run([queuekit, "enqueue", "--queue", user, "--count", "150", "--key-prefix", user] + database,
                           check=True, cwd=folder, stdout=subprocess.DEVNULL)
        serve = subprocess.Popen([queuekit, "serve", "--listen", "127.0.0.1:0", "--heartbeat", "600"] + database,
                                 cwd=folder, stdout=subprocess.PIPE, text=True)
        processes.append(serve)
        line = serve.stdout.readline()
        match = re.search(r"(http://\S+)/", line)
        check(match is not None, f"queuekit serve printed no address: {line!r}")
        base = match.group(1)
        worker = subprocess.Popen([queuekit, "work", "--watch", "--work-ms", "300"] + database,
                                  cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        processes.append(worker)
        browser = subprocess.Popen(
            [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={folder}/chromium", "--window-size=1280,720", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        processes.append(browser)
        port = None
        for line in browser.stderr:
            found = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
            if found:
                port = found.group(1)
                break
        check(port is not None, "chromium did not start its DevTools endpoint")
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=DEADLINE_SECONDS))
        page = DevTools(next(t for t in targets if t["type"] == "page")["webSocketDebuggerUrl"])
        page.call("Page.enable")
        page.call("Runtime.enable")

        # The queues page: its counts change through server-sent events as the worker runs.
        page.load(base + "/")
        check("Queues" in page.evaluate("document.title"), f"not the queues page: {page.evaluate('document.title')}")
        before = text(page, "[data-total=pending]")
        after = changed(page, "[data-total=pending]", before)
        check(number(after) < number(before), f"pending went from {before} to {after}")
        status = text(page, "#live")
        check(status.startswith("live, updated"), f"the live status says {status!r}")
        print(f"browser: pending {before} -> {after} through server-sent events; status {status!r}")

        # Pause alice's queue with its button: the form posts and lands on the queue's page.
        page.evaluate("""document.querySelector('tr[data-queue="uploads-alice"] form[action$="/pause"] button').click()""")
        page.wait_for("Page.loadEventFired")
        body = page.evaluate("document.body.innerText")
        check("Queue uploads-alice" in body and "paused by an operator" in body, f"after Pause: {body[:400]}")
        print("browser: clicked Pause; the queue's page says it is paused by an operator")

        # Alice's queue stops (its running upload may finish first), bob's goes on.
        page.load(base + "/")
        alice = 'tr[data-queue="uploads-alice"] [data-field=pending]'
        bob = 'tr[data-queue="uploads-bob"] [data-field=pending]'
        for _ in range(3):
            changed(page, bob, text(page, bob))
        alice_then, bob_then = text(page, alice), text(page, bob)
        for _ in range(3):
            changed(page, bob, text(page, bob))
        alice_now, bob_now = text(page, alice), text(page, bob)
        check(alice_now == alice_then, f"alice's paused queue went on: {alice_then} -> {alice_now}")
        check(number(bob_now) < number(bob_then), f"bob's queue stopped too: {bob_then} -> {bob_now}")
        state = text(page, 'tr[data-queue="uploads-alice"] [data-field=state]')
        check(state == "paused by an operator", f"alice's state shows {state!r}")
        weight = page.evaluate("""getComputedStyle(document.querySelector('tr[data-queue="uploads-alice"] [data-field=state]')).fontWeight""")
        check(int(weight) >= 700, f"alice's paused state is not bold after the live updates: font-weight {weight}")
        print(f"browser: alice stays at {alice_now} pending while bob goes {bob_then} -> {bob_now}")

        # The charts: server-drawn SVG images of the console's own, reloaded with each update; by
        # now the depth chart has a line of several samples.
        loaded = page.evaluate(CHARTS % {"ms": DEADLINE_SECONDS * 1000})
        check(loaded == [400, 400, 400], f"the charts did not load: {loaded}")
        depth = page.evaluate("fetch(%s).then(function (r) { return r.text(); })" % json.dumps(base + "/charts/depth.svg"))
        check("<polyline" in depth, f"the depth chart has no line: {depth[:400]}")
        print("browser: the throughput, latency and depth charts load; the depth chart draws a line")

        shot = page.call("Page.captureScreenshot", format="png")
        with open(screenshot, "wb") as file:
            file.write(base64.b64decode(shot["data"]))
        print(f"browser: screenshot {screenshot}")

        stored = json.loads(subprocess.run([queuekit, "queues", "--json"] + database, check=True, cwd=folder,
                                           capture_output=True, text=True).stdout)
        check(any(q["name"] == "uploads-alice" and q["pausedByOperator"] for q in stored), f"not paused in the database: {stored}")
        print("browser: passed")
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=DEADLINE_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Failure as failure:
        print(f"browser: FAILED: {failure}", file=sys.stderr)
        sys.exit(1)
