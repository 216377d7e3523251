"""Running code in child interpreters, so that a crash of the op (SIGSEGV, abort) fails one test with its
case name instead of killing pytest.

Two helpers:
  run_child(code, ...)   one fresh `python -c code`, with a timeout; returns a ChildResult.
  WorkerPool             long-lived worker processes speaking a line protocol (one request, one
                         reply), restarted after a crash; used by the fuzz for thousands of cases.
"""
import json
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
REPLY_PREFIX = "@@TESSERA@@ "  # protocol lines start with this; anything else a child prints is ignored


def describe_returncode(rc):
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            return f"killed by signal {-rc} ({signal.Signals(-rc).name})"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit status {rc}"


def tail(text, n=3000):
    text = text or ""
    return text if len(text) <= n else "..." + text[-n:]


class ChildResult:
    def __init__(self, returncode, reply, stdout, stderr, timed_out):
        self.returncode = returncode
        self.reply = reply  # the decoded JSON reply line, or None when the child printed none
        self.stdout = stdout
        self.stderr = stderr
        self.timed_out = timed_out

    def problem(self):
        """A description of why the child did not run to completion, or None."""
        if self.timed_out:
            return f"child timed out (hang?)\nstderr:\n{tail(self.stderr)}"
        if self.returncode != 0:
            return f"child process died: {describe_returncode(self.returncode)}\nstderr:\n{tail(self.stderr)}"
        if self.reply is None:
            return f"child printed no reply\nstdout:\n{tail(self.stdout)}\nstderr:\n{tail(self.stderr)}"
        return None


def child_env():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def run_child(code, timeout=180):
    """Run `code` in a fresh interpreter (the one running pytest) with this directory on sys.path.
    The child reports through `reply(obj)` (defined for it), which prints one protocol line."""
    prologue = ("import sys, json\n"
                f"sys.path.insert(0, {TESTS_DIR!r})\n"
                f"def reply(obj):\n    print({REPLY_PREFIX!r} + json.dumps(obj), flush=True)\n")
    try:
        p = subprocess.run([sys.executable, "-c", prologue + code], capture_output=True, text=True,
                           timeout=timeout, env=child_env(), cwd=TESTS_DIR)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return ChildResult(None, None, out, err, True)
    reply = None
    for line in p.stdout.splitlines():
        if line.startswith(REPLY_PREFIX):
            reply = json.loads(line[len(REPLY_PREFIX):])
    return ChildResult(p.returncode, reply, p.stdout, p.stderr, False)


class _Worker:
    """One worker process: `python script args...`, requests on stdin (one line each), replies on stdout."""

    def __init__(self, argv):
        self.stderr_file = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable] + argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr_file, env=child_env(), cwd=TESTS_DIR)
        self.buf = b""

    def request(self, line, timeout):
        """Send one request; returns ('ok', reply) or ('crash'|'timeout', description)."""
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return "crash", self._death()
        deadline = time.monotonic() + timeout
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            while True:
                while b"\n" in self.buf:
                    raw, self.buf = self.buf.split(b"\n", 1)
                    text = raw.decode(errors="replace")
                    if text.startswith(REPLY_PREFIX):
                        return "ok", json.loads(text[len(REPLY_PREFIX):])
                left = deadline - time.monotonic()
                if left <= 0:
                    self.kill()
                    return "timeout", f"no reply within {timeout} s (hang?)\nstderr:\n{self.stderr_tail()}"
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    return "crash", self._death()
                self.buf += chunk
        finally:
            sel.close()

    def _death(self):
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        return f"worker died: {describe_returncode(self.proc.returncode)}\nstderr:\n{self.stderr_tail()}"

    def stderr_tail(self):
        try:
            self.stderr_file.flush()
            self.stderr_file.seek(0)
            return tail(self.stderr_file.read())
        except (OSError, ValueError):
            return ""

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()  # only this worker, which this object started
            self.proc.wait()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()
        self.stderr_file.close()


class WorkerPool:
    """`n` workers running `argv`; map(requests) sends each request to some worker and returns
    {request: (status, reply_or_description)}. A worker that crashes or hangs is replaced by a fresh one
    and the next request goes on; the crash is recorded against the request it was running. After
    `max_crashes` crashes the remaining requests are not run (a regression that crashes every error path
    would otherwise cost a restart per case); they are left out of the result."""

    def __init__(self, argv, n=2, timeout=120, max_crashes=30):
        self.argv, self.n, self.timeout, self.max_crashes = argv, n, timeout, max_crashes
        self.restarts = 0

    def map(self, requests):
        todo = list(requests)
        results = {}
        lock = threading.Lock()

        def loop():
            worker = None
            try:
                while True:
                    with lock:
                        if not todo:
                            return
                        req = todo.pop(0)
                    if worker is None:
                        worker = _Worker(self.argv)
                    status, payload = worker.request(req, self.timeout)
                    if status != "ok":
                        worker.kill()
                        worker.close()
                        worker = None
                        with lock:
                            self.restarts += 1
                            if self.restarts >= self.max_crashes:
                                todo.clear()
                    with lock:
                        results[req] = (status, payload)
            finally:
                if worker is not None:
                    worker.close()

        threads = [threading.Thread(target=loop, daemon=True) for _ in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
