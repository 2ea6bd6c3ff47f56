"""The API server's proxy to services and pods, which here reaches the simulated Jupyter server of a
notebook pod: `/api/status`, `/api/kernels`, and a small page for anything else."""

from __future__ import annotations

import html
import json
import threading
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduling.simcluster import jupyter, selectors, telemetry
from scheduling.simcluster.clock import parse_time
from scheduling.simcluster.errors import ApiError, not_found

if TYPE_CHECKING:
    from scheduling.simcluster.api import Cluster

JSON = dict[str, Any]


def _target_name(raw: str) -> str:
    """`name`, `name:port`, `http:name:port` or `https:name:port` -> `name`."""
    parts = raw.split(":")
    if parts[0] in ("http", "https") and len(parts) > 1:
        parts = parts[1:]
    return parts[0]


def _backing_pod(cluster: Cluster, plural: str, namespace: str, raw_name: str) -> JSON:
    name = _target_name(raw_name)
    if plural == "pods":
        pod = cluster.get_object("pods", namespace, name)
        if pod is None:
            raise not_found("pods", name)
        return pod
    service = cluster.get_object("services", namespace, name)
    if service is None:
        raise not_found("services", name)
    selector = service.get("spec", {}).get("selector") or {}
    ready = [
        p
        for p in cluster.list_objects("pods", namespace)
        if selector
        and all(
            r.matches(p["metadata"].get("labels") or {})
            for r in selectors.label_selector_requirements({"matchLabels": selector})
        )
        and p.get("status", {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]
    if not ready:
        raise ApiError(503, "ServiceUnavailable", f'no endpoints available for service "{name}"')
    return ready[0]


class Proxy:
    """Answers proxied requests. Remembers when each notebook last saw API traffic, since every
    authenticated Jupyter request counts as activity unless it says `no_track_activity=1`."""

    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.cluster = cluster
        self.seed = seed
        self._api_activity: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def answer(
        self, plural: str, namespace: str, raw_name: str, rest: str, query: dict[str, str]
    ) -> tuple[int, str, bytes]:
        pod = _backing_pod(self.cluster, plural, namespace, raw_name)
        status = pod.get("status", {})
        if status.get("phase") != "Running":
            raise ApiError(503, "ServiceUnavailable", f'pod "{pod["metadata"]["name"]}" is not running')
        meta = pod["metadata"]
        profile = telemetry.profile_for_pod(meta.get("annotations"), meta.get("labels"))
        started = parse_time(status.get("startTime") or meta["creationTimestamp"])
        now = self.cluster.clock.now()
        # Jupyter may be served under a base URL (/notebook/<ns>/<name>/api/...); match on the tail.
        path = "/" + rest.strip("/")
        tracked = path.endswith("/api/status") or query.get("no_track_activity") == "1"
        with self._lock:
            if not tracked:
                self._api_activity[meta["uid"]] = now
            touched = self._api_activity.get(meta["uid"])
        if path.endswith("/api/status"):
            body: Any = jupyter.jupyter_status(profile, started, now, self.seed, meta["uid"])
            if touched is not None and touched > parse_time(body["last_activity"]):
                body["last_activity"] = jupyter.isoformat(touched)
        elif path.endswith("/api/kernels"):
            body = jupyter.jupyter_kernels(profile, started, now, self.seed, meta["uid"])
        else:
            title = html.escape(f"Simulated Jupyter for {meta['namespace']}/{meta['name']}")
            page = f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1></body></html>"
            return 200, "text/html; charset=utf-8", page.encode()
        return 200, "application/json", json.dumps(body).encode()
