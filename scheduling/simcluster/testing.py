"""Running a simulated cluster from tests and demos, and driving it only the way a client can: through
the Kubernetes API (official client, kubectl) and the simulator's `/_sim/` control endpoints."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config

from scheduling.simcluster import kubeconfig
from scheduling.simcluster.controllers import Timings
from scheduling.simcluster.server import SimServer

JSON = dict[str, Any]

# Fast enough for tests: pods start in 0.2 s real, MIG changes land in 0.1 s real at speed 10.
TEST_TIMINGS = Timings(start_delay_s=2.0, termination_s=1.0, mig_reconfigure_s=1.0)


class SimAdminError(RuntimeError):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


@dataclass
class SimCluster:
    url: str
    kubeconfig_path: Path
    token: str  # the API server's bearer token, as written into the kubeconfig
    ca_pem: str  # the certificate it serves (self-signed), also in the kubeconfig
    plain_url: str  # its plain-HTTP door: the service proxy and DCGM /metrics, no credentials (PlainDoorRouter)

    @classmethod
    def from_kubeconfig(cls, path: Path, plain_url: str = "") -> SimCluster:
        """The cluster a server in another process serves, from the kubeconfig it wrote."""
        url, token, ca_pem = kubeconfig.read(path)
        return cls(url, path, token, ca_pem, plain_url)

    def api_client(self) -> client.ApiClient:
        """An ApiClient configured from the kubeconfig, as the portal configures its own."""
        return config.new_client_from_config(config_file=str(self.kubeconfig_path))

    # -- the /_sim/ control endpoints --------------------------------------------------------------

    def admin(self, method: str, path: str, body: JSON | None = None) -> JSON:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the URL is the loopback server we started
            f"{self.url}/_sim/{path.lstrip('/')}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            context = ssl.create_default_context(cadata=self.ca_pem)
            with urllib.request.urlopen(request, timeout=30, context=context) as response:  # noqa: S310
                result: JSON = json.loads(response.read() or b"{}")
                return result
        except urllib.error.HTTPError as exc:
            raise SimAdminError(exc.code, exc.read().decode()) from exc

    def inject_fault(
        self,
        *,
        verb: str = "*",
        resource: str = "*",
        namespace: str = "*",
        count: int = 1,
        status: int = 0,
        delay_s: float = 0.0,
        message: str = "",
        duration_s: float = 0.0,
    ) -> JSON:
        """Fail (status) and/or delay the next `count` API calls matching verb/resource/namespace, or
        with `duration_s` every matching call for that many simulated seconds. `resource` may also be a
        non-resource path such as `/version`; `*` covers every path (see faults.py)."""
        spec = {
            "verb": verb,
            "resource": resource,
            "namespace": namespace,
            "count": count,
            "status": status,
            "delay_s": delay_s,
            "message": message,
            "duration_s": duration_s,
        }
        return self.admin("POST", "faults", spec)

    def clear_faults(self) -> None:
        self.admin("DELETE", "faults")

    def advance_clock(self, seconds: float) -> JSON:
        return self.admin("POST", "clock", {"advance_s": seconds})

    def set_speed(self, speed: float) -> JSON:
        return self.admin("POST", "clock", {"speed": speed})

    def clock(self) -> JSON:
        return self.admin("GET", "clock")

    def set_node_ready(self, node: str, ready: bool) -> JSON:
        return self.admin("POST", f"nodes/{node}/{'ready' if ready else 'not-ready'}")

    def lose_gpu(self, node: str, index: int) -> JSON:
        return self.admin("POST", f"nodes/{node}/lose-gpu", {"index": index})

    def restore_gpu(self, node: str, index: int) -> JSON:
        return self.admin("POST", f"nodes/{node}/restore-gpu", {"index": index})

    def evict_pod(self, namespace: str, name: str, message: str = "") -> JSON:
        """Node-pressure eviction by the kubelet (the pod fails with reason Evicted)."""
        return self.admin("POST", f"pods/{namespace}/{name}/evict", {"message": message} if message else {})

    def fail_pod(self, namespace: str, name: str, *, reason: str = "Error", message: str = "injected failure") -> JSON:
        return self.admin("POST", f"pods/{namespace}/{name}/fail", {"reason": reason, "message": message})

    def drop_watches(self) -> int:
        return int(self.admin("POST", "watches/drop")["dropped"])

    def settle(self, timeout_s: float = 5.0) -> JSON:
        """Let the controllers catch up with everything due now."""
        return self.admin("POST", "settle", {"timeout_s": timeout_s})


@contextmanager
def running_simcluster(
    nodes_file: str | Path | None = None,
    *,
    seed: int = 0,
    speed: float = 1.0,
    workload_speed: float = 1.0,
    tmp_dir: str | Path,
    timings: Timings | None = None,
) -> Iterator[SimCluster]:
    """Serve a simulated cluster on a free loopback port in this process, with a kubeconfig in tmp_dir."""
    server = SimServer(
        nodes_file=nodes_file,
        seed=seed,
        speed=speed,
        workload_speed=workload_speed,
        timings=timings or TEST_TIMINGS,
        plain_port=0,
    )
    server.start()
    try:
        kubeconfig = server.write_kubeconfig(Path(tmp_dir) / "kubeconfig")
        yield SimCluster(server.url, kubeconfig, server.token, server.cert.cert_pem, str(server.plain_url))
    finally:
        server.stop()
