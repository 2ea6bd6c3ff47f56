"""``python -m scheduling.nvml_agent --port 9400 --hostname $NODE_NAME --proc /host/proc --pod-logs /var/log/pods``

Exit codes: 0 after SIGTERM or SIGINT; 1 when the port cannot be bound or ``pynvml`` (``nvidia-ml-py``) is
not installed; 2 for bad arguments. NVML being unusable (no library, no driver, no permission) is no exit:
the agent serves ``gpuportal_nvml_agent_up 0`` and retries (``server`` says why).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from scheduling.nvml_agent.server import Agent, make_server

log = logging.getLogger("scheduling.nvml_agent")


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m scheduling.nvml_agent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on (default all)")  # noqa: S104
    parser.add_argument("--port", type=int, default=9400, help="dcgm-exporter's port by default")
    parser.add_argument(
        "--hostname",
        default=os.environ.get("NODE_NAME") or socket.gethostname(),
        help="the Hostname label: the node's name (default $NODE_NAME, else the host name)",
    )
    parser.add_argument("--proc", type=Path, default=Path("/proc"), help="the host's /proc (host PIDs)")
    parser.add_argument("--pod-logs", type=Path, default=Path("/var/log/pods"), help="the kubelet's pod log folder")
    parser.add_argument("--cache-seconds", type=float, default=5.0, help="reuse a reading for this long")
    parser.add_argument("--retry-seconds", type=float, default=10.0, help="between nvmlInit tries while it fails")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        import pynvml  # the nvidia-ml-py package; it loads libnvidia-ml.so.1 only in nvmlInit
    except ImportError:
        log.error("pynvml is not installed: pip install nvidia-ml-py")
        return 1
    agent = Agent(
        pynvml,
        hostname=args.hostname,
        proc=args.proc,
        pod_logs=args.pod_logs,
        cache_seconds=args.cache_seconds,
        retry_seconds=args.retry_seconds,
    )
    try:
        server = make_server(agent, args.host, args.port)
    except OSError as exc:
        log.error("cannot listen on %s:%d: %s", args.host, args.port, exc)
        return 1

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("signal %d: stopping", signum)
        # shutdown() waits for serve_forever() to return, which runs in this (the main) thread
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    agent.page()  # read once now, so the log says at start whether NVML answers
    log.info(
        "serving http://%s:%d/metrics for %s (NVML %s)",
        args.host,
        server.server_address[1],
        args.hostname,
        "up" if agent.up else "down",
    )
    try:
        server.serve_forever()
    finally:
        server.server_close()
        agent.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
