"""The agent: NVML read at scrape time (cached a few seconds), and the HTTP server for ``/metrics``.

**When NVML cannot be read** (library not found, driver not loaded, no permission, the driver gone
later) the agent does not exit: it keeps serving a page holding only ``gpuportal_nvml_agent_up 0``,
logs the cause once per change of state, and tries ``nvmlInit`` again on the next scrape (at most every
``retry_seconds``). A crash-looping DaemonSet pod would make the portal's direct scrape fail as a whole
(one unreachable endpoint fails the read); an empty page only leaves that node's pods without readings,
which the portal takes as missing data, never as idle. The driver often loads after the agent starts
(the GPU Operator's driver container), and the next scrape then finds it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from scheduling.nvml_agent import exposition, nvml, pods

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def init_failure(module: nvml.Nvml, exc: Exception) -> str:
    """What to tell the operator when ``nvmlInit`` fails, by NVML's error class."""
    if isinstance(exc, module.NVMLError_LibraryNotFound):
        return (
            "NVML library not found (libnvidia-ml.so.1): the container has no NVIDIA driver libraries; run it "
            "with the NVIDIA container runtime (runtimeClassName: nvidia, or CDI) and NVIDIA_VISIBLE_DEVICES=all"
        )
    if isinstance(exc, module.NVMLError_DriverNotLoaded):
        return "NVIDIA driver not loaded on this node: NVML found no kernel module (is the driver installed?)"
    if isinstance(exc, module.NVMLError_NoPermission):
        return (
            "no permission to use NVML: the container cannot open /dev/nvidiactl or /dev/nvidia*; check the "
            "device nodes the runtime mounts and the user the agent runs as"
        )
    return f"NVML initialisation failed: {exc}"


@dataclass
class Agent:
    """One node's NVML behind a cache. ``module`` is ``pynvml`` (or the tests' replay of it)."""

    module: nvml.Nvml
    hostname: str
    proc: Path = Path("/proc")
    pod_logs: Path = Path("/var/log/pods")
    cache_seconds: float = 5.0
    retry_seconds: float = 10.0
    clock: Callable[[], float] = time.monotonic
    notes: nvml.Notes = field(default_factory=nvml.Notes)
    _ready: bool = False
    _failure: str | None = None  # the last cause logged, so a lasting one is said once
    _last_try: float | None = None
    _page: str = ""
    _page_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def page(self) -> str:
        """The ``/metrics`` text, read anew when the cached one is older than ``cache_seconds``."""
        with self._lock:
            now = self.clock()
            if self._page_at is None or now - self._page_at >= self.cache_seconds:
                self._page, self._page_at = self._read(now), now
            return self._page

    @property
    def up(self) -> bool:
        return self._ready

    def _start(self, now: float) -> bool:
        if self._ready:
            return True
        if self._last_try is not None and now - self._last_try < self.retry_seconds:
            return False
        self._last_try = now
        try:
            self.module.nvmlInit()
        except self.module.NVMLError as exc:
            self._down(init_failure(self.module, exc))
            return False
        self._ready = True
        if self._failure is not None:
            log.info("NVML answers again; serving GPU series")
        self._failure = None
        return True

    def _down(self, cause: str) -> None:
        if cause != self._failure:
            log.error("%s; serving %s 0 and trying again", cause, exposition.UP)
        self._failure = cause

    def _read(self, now: float) -> str:
        if not self._start(now):
            return exposition.render(None, self.hostname, {})
        try:
            reading = nvml.read_node(self.module, self.notes)
        except self.module.NVMLError as exc:  # the driver went away under us, say: start again next time
            self._ready = False
            self._last_try = now
            self._down(f"NVML stopped answering ({exc})")
            self._shutdown()
            return exposition.render(None, self.hostname, {})
        pids = {p.pid for gpu in reading.gpus for p in gpu.processes}
        pids |= {p.pid for gpu in reading.gpus for m in gpu.mig or () for p in m.processes}
        return exposition.render(reading, self.hostname, pods.pods_of(pids, self.proc, self.pod_logs))

    def _shutdown(self) -> None:
        with contextlib.suppress(self.module.NVMLError):
            self.module.nvmlShutdown()

    def close(self) -> None:
        with self._lock:
            if self._ready:
                self._shutdown()
                self._ready = False


def make_server(agent: Agent, host: str, port: int) -> ThreadingHTTPServer:
    """``/metrics`` (the page) and ``/healthz`` (the process answers; NVML's state is in the page)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, agent.page(), CONTENT_TYPE)
            elif path == "/healthz":
                self._send(200, "ok\n", "text/plain; charset=utf-8")
            else:
                self._send(404, "not found: try /metrics\n", "text/plain; charset=utf-8")

        def _send(self, status: int, text: str, content_type: str) -> None:
            body = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("%s " + format, self.address_string(), *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server
