"""The API server's proxy to services and pods, which here reaches the simulated Jupyter server of a
notebook pod: `/api/status`, `/api/kernels`, a login page, and a small page for anything else. Jupyter
checks the token the pod was started with (`JUPYTER_TOKEN`, usually from a Secret) before answering."""

from __future__ import annotations

import base64
import binascii
import html
import json
import threading
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class ProxyRequest:
    plural: str  # services or pods
    namespace: str
    name: str  # as in the path: name, name:port, http:name:port
    rest: str  # the path after `/proxy`
    query: dict[str, str]
    headers: dict[str, str]  # lower-case keys; the API server's own credentials already removed
    prefix: str  # the path up to and including `/proxy`: where the browser sees Jupyter's base URL


@dataclass(frozen=True)
class ProxyAnswer:
    status: int
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def _secret_value(cluster: Cluster, namespace: str, ref: JSON) -> str | None:
    secret = cluster.get_object("secrets", namespace, str(ref.get("name", "")))
    if secret is None:
        return None
    key = str(ref.get("key", ""))
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    encoded = (secret.get("data") or {}).get(key)
    try:
        return base64.b64decode(encoded, validate=True).decode() if encoded is not None else None
    except (binascii.Error, UnicodeDecodeError):
        return None


def _env_token(cluster: Cluster, namespace: str, container: JSON) -> str | None:
    for var in container.get("env") or []:
        if var.get("name") != "JUPYTER_TOKEN":
            continue
        if "value" in var:
            return str(var["value"])
        ref = (var.get("valueFrom") or {}).get("secretKeyRef")
        return _secret_value(cluster, namespace, ref) if ref else None
    return None


def notebook_token(cluster: Cluster, pod: JSON) -> str | None:
    """The token the pod's Jupyter was started with (see jupyter.configured_token)."""
    namespace = pod["metadata"]["namespace"]
    for container in pod.get("spec", {}).get("containers") or []:
        args = [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]
        token = jupyter.configured_token(args, _env_token(cluster, namespace, container))
        if token is not None:
            return token
    return None


def _page(title: str) -> ProxyAnswer:
    escaped = html.escape(title)
    page = f"<!doctype html><html><head><title>{escaped}</title></head><body><h1>{escaped}</h1></body></html>"
    return ProxyAnswer(200, "text/html; charset=utf-8", page.encode())


class Proxy:
    """Answers proxied requests. Remembers when each notebook last saw API traffic, since every
    authenticated Jupyter request counts as activity unless it says `no_track_activity=1`."""

    def __init__(self, cluster: Cluster, seed: int) -> None:
        self.cluster = cluster
        self.seed = seed
        self._api_activity: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def answer(self, request: ProxyRequest) -> ProxyAnswer:
        pod = _backing_pod(self.cluster, request.plural, request.namespace, request.name)
        if pod.get("status", {}).get("phase") != "Running":
            raise ApiError(503, "ServiceUnavailable", f'pod "{pod["metadata"]["name"]}" is not running')
        # Jupyter may be served under a base URL (/notebook/<ns>/<name>/api/...); match on the tail.
        path = "/" + request.rest.strip("/")
        if path.endswith("/login"):
            return _page("Simulated Jupyter: log in with a token")
        if not jupyter.authorised(notebook_token(self.cluster, pod), request.query, request.headers):
            return ProxyAnswer(*jupyter.refusal(path, request.prefix))
        return self._jupyter(pod, path, request.query)

    def _jupyter(self, pod: JSON, path: str, query: dict[str, str]) -> ProxyAnswer:
        status, meta = pod.get("status", {}), pod["metadata"]
        profile = telemetry.profile_for_pod(meta.get("annotations"), meta.get("labels"))
        busy = telemetry.busy_seconds_for_pod(meta.get("annotations"))
        started = parse_time(status.get("startTime") or meta["creationTimestamp"])
        clock = self.cluster.clock
        now = clock.now()
        played = clock.workload_start(started, now)  # where the profile is (workloads may run faster)

        def on_clock(stamp: str) -> str:
            return jupyter.isoformat(clock.from_workload(parse_time(stamp), now))

        tracked = path.endswith("/api/status") or query.get("no_track_activity") == "1"
        with self._lock:
            if not tracked:
                self._api_activity[meta["uid"]] = now
            touched = self._api_activity.get(meta["uid"])
        if path.endswith("/api/status"):
            body: Any = jupyter.jupyter_status(profile, played, now, self.seed, meta["uid"], busy)
            body["started"], body["last_activity"] = jupyter.isoformat(started), on_clock(body["last_activity"])
            if touched is not None and touched > parse_time(body["last_activity"]):
                body["last_activity"] = jupyter.isoformat(touched)
        elif path.endswith("/api/kernels"):
            body = jupyter.jupyter_kernels(profile, played, now, self.seed, meta["uid"], busy)
            for kernel in body:
                kernel["last_activity"] = on_clock(kernel["last_activity"])
        else:
            return _page(f"Simulated Jupyter for {meta['namespace']}/{meta['name']}")
        return ProxyAnswer(200, "application/json", json.dumps(body).encode())
