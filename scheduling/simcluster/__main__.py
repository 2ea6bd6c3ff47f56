"""`python -m scheduling.simcluster`: serve a simulated GPU cluster on loopback until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from pathlib import Path
from types import FrameType

from scheduling.simcluster.controllers import Timings
from scheduling.simcluster.server import SimServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scheduling.simcluster", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="listen port on 127.0.0.1 (0: any free port)")
    parser.add_argument("--nodes", type=Path, default=None, help="cluster YAML (default: the demo cluster)")
    parser.add_argument("--kubeconfig", type=Path, default=None, help="write a kubeconfig for the server here")
    parser.add_argument("--seed", type=int, default=0, help="seed for names, uids and telemetry")
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per real second")
    parser.add_argument(
        "--workload-speed",
        type=float,
        default=1.0,
        help="workloads (job durations, activity profiles) run this many times faster than the clock",
    )
    parser.add_argument(
        "--start-delay", type=float, default=Timings.start_delay_s, help="simulated seconds from bind to Running"
    )
    parser.add_argument(
        "--termination",
        type=float,
        default=Timings.termination_s,
        help="simulated seconds a deleted pod takes to stop (or its grace period, if shorter)",
    )
    parser.add_argument(
        "--mig-reconfigure",
        type=float,
        default=Timings.mig_reconfigure_s,
        help="simulated seconds a MIG or device-plugin config change stays pending",
    )
    parser.add_argument(
        "--plain-port",
        type=int,
        default=None,
        help="also serve the service proxy and /metrics, without credentials, over plain HTTP here (0: any free port)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(asctime)s %(name)s %(message)s"
    )

    # The controller thread is CPU-bound; a short GIL switch interval keeps request threads responsive.
    sys.setswitchinterval(0.0005)
    server = SimServer(
        nodes_file=args.nodes,
        seed=args.seed,
        speed=args.speed,
        workload_speed=args.workload_speed,
        port=args.port,
        timings=Timings(
            start_delay_s=args.start_delay, termination_s=args.termination, mig_reconfigure_s=args.mig_reconfigure
        ),
        plain_port=args.plain_port,
    )
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.start()
    if args.kubeconfig:
        server.write_kubeconfig(args.kubeconfig)
    print(server.url, flush=True)
    stopped.wait()
    server.stop()


if __name__ == "__main__":
    main()
