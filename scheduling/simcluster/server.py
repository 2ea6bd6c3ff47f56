"""The simulated cluster as one object: API server state, controllers and the HTTP listener."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from scheduling.simcluster import admin, kubeconfig, pod_actions, proxy, schemas, tls
from scheduling.simcluster.api import Cluster
from scheduling.simcluster.clock import SimClock
from scheduling.simcluster.controllers import Controllers, Timings
from scheduling.simcluster.errors import bad_request
from scheduling.simcluster.faults import Faults
from scheduling.simcluster.handlers import ApiHTTPServer, ApiRequestHandler, PlainDoorRouter, Router
from scheduling.simcluster.nodes import default_cluster_file, load_cluster_file
from scheduling.simcluster.proxy import ProxyAnswer, ProxyRequest

JSON = dict[str, Any]
log = logging.getLogger(__name__)


class SimServer:
    def __init__(
        self,
        *,
        nodes_file: str | Path | None = None,
        seed: int = 0,
        speed: float = 1.0,
        workload_speed: float = 1.0,
        host: str = "127.0.0.1",
        port: int = 0,
        timings: Timings | None = None,
        token: str | None = None,
        plain_port: int | None = None,
    ) -> None:
        self.token = token or kubeconfig.new_token()
        self.spec = load_cluster_file(nodes_file or default_cluster_file())
        self.seed = seed
        self.clock = SimClock(speed=speed, workload_speed=workload_speed)
        self.cluster = Cluster(clock=self.clock, seed=seed)
        self.faults = Faults(self.clock)
        self.controllers = Controllers(self.cluster, self.spec, seed=seed, timings=timings or Timings())
        self.cert = tls.self_signed(host)
        self.httpd = ApiHTTPServer((host, port), ApiRequestHandler)
        self.httpd.ssl_context = self.cert.server_context()
        self.httpd.router = Router(self)
        # Optional plain-HTTP door for what needs no credentials: notebook links, DCGM scrapes (PlainDoorRouter).
        self.plain_door: ApiHTTPServer | None = None
        if plain_port is not None:
            self.plain_door = ApiHTTPServer((host, plain_port), ApiRequestHandler)
            self.plain_door.router = PlainDoorRouter(self)
        self._proxy = proxy.Proxy(self.cluster, seed)

    @property
    def address(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def url(self) -> str:
        return f"https://{self.address}"

    @property
    def plain_url(self) -> str | None:
        """The plain-HTTP door's base URL (None without one)."""
        if self.plain_door is None:
            return None
        host, port = self.plain_door.server_address[:2]
        return f"http://{host!s}:{port}"

    def _listeners(self) -> list[ApiHTTPServer]:
        return [self.httpd] + ([self.plain_door] if self.plain_door else [])

    def start(self) -> None:
        schemas.warm_up()
        self.cluster.bootstrap()
        self.controllers.start()
        for httpd in self._listeners():
            threading.Thread(target=httpd.serve_forever, name="simcluster-http", daemon=True).start()
        log.info("simulated cluster serving on %s", self.url)

    def stop(self) -> None:
        self.cluster.store.drop_watches()
        for httpd in self._listeners():
            httpd.shutdown()
        self.controllers.stop()
        for httpd in self._listeners():
            httpd.server_close()

    def write_kubeconfig(self, path: str | Path) -> Path:
        return kubeconfig.write(path, self.url, self.token, self.cert.cert_pem)

    # -- what the HTTP routes call ------------------------------------------------------------------

    def describe(self) -> JSON:
        return {
            "now": self.clock.now().isoformat(),
            "speed": self.clock.speed,
            "seed": self.seed,
            "resourceVersion": str(self.cluster.store.resource_version),
            "faults": self.faults.pending(),
            "nodes": self.controllers.nodes.summary(),
        }

    def admin(self, method: str, parts: list[str], body: Any) -> tuple[int, JSON]:
        return admin.handle(self, method, parts, body)

    def metrics_text(self) -> str:
        return self.controllers.metrics_text()

    def pod_log(self, namespace: str, name: str, query: dict[str, str]) -> str | Iterator[bytes]:
        return pod_actions.pod_log(self.cluster, namespace, name, query)

    def evict(self, namespace: str, name: str, body: JSON) -> JSON:
        return pod_actions.evict(self.cluster, namespace, name, body)

    def bind(self, namespace: str, name: str, body: JSON) -> JSON:
        target = (body.get("target") or {}).get("name")
        if not target:
            raise bad_request("Binding target must be specified: target.name is required")
        return self.controllers.bind(namespace, name, target)

    def proxy(self, request: ProxyRequest) -> ProxyAnswer:
        return self._proxy.answer(request)
