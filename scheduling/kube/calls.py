"""Idempotent, time-limited calls to the Kubernetes API, over the official client.

- Every call passes ``_request_timeout``, so a hung API server cannot hang a Celery worker. It is
  passed as a (connect, read) pair: the client silently ignores a plain float (it only honours an
  int or a 2-tuple), and the read timeout bounds each wait for the server, not the whole transfer.
- Create is idempotent: a 409 AlreadyExists counts as success and answers the existing object; a
  delete of something already gone answers False. A retried task therefore never makes a second pod.
- Failures come out as :class:`TransientKubeError` (worth retrying: timeouts, connection errors, 429,
  5xx, 409 Conflict) or :class:`PermanentKubeError` (the request itself is wrong: 400, 403, 404, 422;
  ``.message`` carries the API server's explanation for the user).
- There are **no retries in here**: the Celery task retries transient errors with backoff
  (``autoretry_for``), where the retry budget and the task's other steps are visible. Give this class
  an ApiClient whose ``Configuration.retries`` is False: urllib3's default otherwise retries a GET
  three more times on a read timeout (4x the timeout) and on 429/503 with Retry-After.
- Objects come back as plain JSON dicts (responses are read with ``_preload_content=False``), so
  callers and tests never depend on the client's model classes. So do watch events: :meth:`Kube.watch`
  reads the stream line by line and decodes each with ``orjson`` (the client's ``Watch`` would build model
  objects, about ten times the cost; ``json.loads`` takes about twice orjson's time on a pod, and every
  worker process decodes every pod and node event). The informer (``informer.py``) is its one user.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import orjson
import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduling.kube.models import k8s

JSON = dict[str, Any]
Objects = list[JSON]  # a module-level alias: inside Kube, `list` is the method

# 409 on create means AlreadyExists, which ensure() handles; a 409 elsewhere is an update that lost a
# race on resourceVersion, fine to retry. 408 and 429 say "try later"; 5xx is the server's trouble.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})


class KubeError(Exception):
    """A Kubernetes API call failed."""

    def __init__(self, message: str, *, status: int | None = None, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason = reason


class TransientKubeError(KubeError):
    """Retrying later may work: timeouts, connection errors, throttling, server errors, conflicts."""


class PermanentKubeError(KubeError):
    """The request is wrong and will stay wrong; ``message`` is the API's Status message."""


def _status_body(exc: ApiException) -> JSON:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if not body:
        return {}
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:  # a ValueError, as json's
        return {"message": body}
    return parsed if isinstance(parsed, dict) else {}


# Failed calls by status since the last take_api_errors(), in this process ("0": refused before sending;
# "connection": no answer). The loops add them to the database (scheduling.loops.passes), for /metrics.
_api_errors: Counter[str] = Counter()
_api_errors_lock = threading.Lock()


def take_api_errors() -> dict[str, int]:
    """The failures counted since the last call, and start counting afresh."""
    with _api_errors_lock:
        taken = dict(_api_errors)
        _api_errors.clear()
    return taken


def classify(exc: BaseException) -> KubeError:
    """The portal's view of a failure from the client, urllib3 or the socket layer (and counted)."""
    if isinstance(exc, KubeError):
        return exc
    label = str(int(exc.status or 0)) if isinstance(exc, ApiException) else "connection"
    with _api_errors_lock:
        _api_errors[label] += 1
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        body = _status_body(exc)
        reason = str(body.get("reason") or exc.reason or "")
        message = str(body.get("message") or exc.reason or f"HTTP {status}")
        if status == 0:
            # The client's own refusal to send (e.g. TLS setup failed); nothing reached the server.
            return TransientKubeError(message, status=None, reason=reason)
        if status in _TRANSIENT_STATUSES or status >= 500:
            return TransientKubeError(message, status=status, reason=reason)
        return PermanentKubeError(message, status=status, reason=reason)
    if isinstance(exc, urllib3.exceptions.HTTPError | OSError):
        # urllib3: MaxRetryError, NewConnectionError, ProtocolError, ReadTimeoutError, ...
        # OSError: TimeoutError, ConnectionError and the rest of the socket layer.
        return TransientKubeError(f"{type(exc).__name__}: {exc}")
    return KubeError(f"{type(exc).__name__}: {exc}")


_CAUGHT = (ApiException, urllib3.exceptions.HTTPError, OSError)  # OSError covers socket timeouts


@dataclass(frozen=True)
class _Kind:
    api: type  # CoreV1Api or BatchV1Api
    snake: str  # in the client's method names: create_namespaced_<snake>, list_<snake>_for_all_namespaces
    api_version: str
    namespaced: bool = True


_KINDS = {
    "Namespace": _Kind(client.CoreV1Api, "namespace", "v1", namespaced=False),
    "Node": _Kind(client.CoreV1Api, "node", "v1", namespaced=False),
    "Pod": _Kind(client.CoreV1Api, "pod", "v1"),
    "Service": _Kind(client.CoreV1Api, "service", "v1"),
    "Secret": _Kind(client.CoreV1Api, "secret", "v1"),
    "PersistentVolumeClaim": _Kind(client.CoreV1Api, "persistent_volume_claim", "v1"),
    "Event": _Kind(client.CoreV1Api, "event", "v1"),
    "Job": _Kind(client.BatchV1Api, "job", "batch/v1"),
    "Ingress": _Kind(client.NetworkingV1Api, "ingress", "networking.k8s.io/v1"),
    "PriorityClass": _Kind(client.SchedulingV1Api, "priority_class", "scheduling.k8s.io/v1", namespaced=False),
    # Dynamic Resource Allocation (scheduling/dra.py): what the driver publishes, and the claims pods use.
    "ResourceSlice": _Kind(client.ResourceV1Api, "resource_slice", "resource.k8s.io/v1", namespaced=False),
    "ResourceClaim": _Kind(client.ResourceV1Api, "resource_claim", "resource.k8s.io/v1"),
    "ResourceClaimTemplate": _Kind(client.ResourceV1Api, "resource_claim_template", "resource.k8s.io/v1"),
}


def _kind(kind: str) -> _Kind:
    try:
        return _KINDS[kind]
    except KeyError:
        raise ValueError(f"unsupported kind {kind!r}; known: {', '.join(sorted(_KINDS))}") from None


class Kube:
    """The portal's handle on one cluster. Thread-safe as far as the underlying ApiClient is."""

    def __init__(self, api_client: client.ApiClient, timeout: float) -> None:
        self.api_client = api_client
        self.timeout = timeout
        self._timeout = (timeout, timeout)  # see the module docstring: a float would be ignored
        self._apis: dict[type, Any] = {}

    # -- plumbing -----------------------------------------------------------------------------------

    def _method(self, kind: _Kind, verb: str, namespace: str | None) -> Any:
        api = self._apis.get(kind.api)
        if api is None:
            api = self._apis[kind.api] = kind.api(self.api_client)
        if not kind.namespaced:
            return getattr(api, f"{verb}_{kind.snake}")
        if namespace is None:
            if verb != "list":
                raise ValueError(f"{verb} of a namespaced kind needs a namespace")
            return getattr(api, f"list_{kind.snake}_for_all_namespaces")
        return getattr(api, f"{verb}_namespaced_{kind.snake}")

    def _call(self, kind: _Kind, verb: str, namespace: str | None, *args: Any, **kwargs: Any) -> JSON:
        """One API call answering raw JSON; failures come out classified."""
        method = self._method(kind, verb, namespace)
        if kind.namespaced and namespace is not None:
            kwargs["namespace"] = namespace
        try:
            response = method(*args, _request_timeout=self._timeout, _preload_content=False, **kwargs)
            data = response.data
        except _CAUGHT as exc:
            raise classify(exc) from exc
        if not data:
            return {}
        answer: JSON = orjson.loads(data)
        return answer

    # -- public calls ---------------------------------------------------------------------------------

    def ensure(self, obj: Any) -> JSON:
        """Create ``obj`` (a client model or a dict with apiVersion/kind) unless it exists; answer the
        object as stored. An existing object is left as it is (never updated); one that is still
        being deleted raises TransientKubeError, so the caller retries after it is gone."""
        body = self.api_client.sanitize_for_serialization(obj)
        kind = _kind(body["kind"])
        namespace = body["metadata"].get("namespace") if kind.namespaced else None
        if kind.namespaced and not namespace:
            raise ValueError(f"{body['kind']} {body['metadata'].get('name')!r} has no namespace")
        try:
            return self._call(kind, "create", namespace, body=body)
        except TransientKubeError as exc:
            if exc.status != 409 or exc.reason != "AlreadyExists":
                raise
        what = f"{body['kind']} {body['metadata']['name']}"
        existing = self.get(body["kind"], namespace, body["metadata"]["name"])
        if existing is None:
            raise TransientKubeError(f"{what} existed a moment ago and is gone", status=409, reason="Conflict")
        if existing["metadata"].get("deletionTimestamp"):
            # The old one (say, the pod of a stop just before a resume) is still terminating; answering
            # it would report a dying object as created. Try again once it is gone.
            raise TransientKubeError(f"{what} is still being deleted", status=409, reason="AlreadyExists")
        return existing

    def get(self, kind: str, namespace: str | None, name: str) -> JSON | None:
        """The object, or None when there is none."""
        try:
            return self._call(_kind(kind), "read", namespace, name=name)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return None
            raise

    def delete(self, kind: str, namespace: str | None, name: str, *, propagation: str = "Background") -> bool:
        """Delete; True when something was deleted, False when it was already gone.

        ``Background`` propagation matters for Jobs: the API's default for batch/v1 Jobs orphans
        their pods.
        """
        options = k8s.V1DeleteOptions(propagation_policy=propagation)
        try:
            self._call(_kind(kind), "delete", namespace, name=name, body=options)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list(self, kind: str, namespace: str | None, label_selector: str = "") -> Objects:
        """Objects of a kind in a namespace (None: all namespaces), with apiVersion and kind filled in
        (list items lack them)."""
        return self.list_with_version(kind, namespace, label_selector)[0]

    def list_with_version(self, kind: str, namespace: str | None, label_selector: str = "") -> tuple[Objects, str]:
        """As :meth:`list`, with the list's ``metadata.resourceVersion``: where a :meth:`watch` of the same
        objects picks up without missing a change."""
        k = _kind(kind)
        answer = self._call(k, "list", namespace if k.namespaced else None, label_selector=label_selector)
        items: Objects = answer.get("items") or []
        for item in items:
            item.setdefault("apiVersion", k.api_version)
            item.setdefault("kind", kind)
        return items, str((answer.get("metadata") or {}).get("resourceVersion") or "")

    def watch(self, kind: str, resource_version: str, *, timeout_seconds: int = 300) -> WatchStream:
        """Open a watch of every object of a kind, in all namespaces, after ``resource_version`` (from
        :meth:`list_with_version`, or an event's object), with bookmarks. The server ends the stream after
        ``timeout_seconds``; the read timeout allows for that plus the usual timeout, since a quiet watch
        may send nothing at all until then. A resourceVersion the server no longer holds comes back as an
        ``ERROR`` event with a 410 Status object (or, from some servers, as a 410 error right away)."""
        k = _kind(kind)
        method = self._method(k, "list", None)
        query: dict[str, Any] = {"allow_watch_bookmarks": True, "timeout_seconds": timeout_seconds}
        if resource_version:
            query["resource_version"] = resource_version
        try:
            response = method(
                watch=True,
                _request_timeout=(self.timeout, self.timeout + timeout_seconds),
                _preload_content=False,
                **query,
            )
        except _CAUGHT as exc:
            raise classify(exc) from exc
        return WatchStream(response)

    def pod_log(self, namespace: str, name: str, tail_lines: int = 100) -> str:
        """The last lines of the pod's (only) container."""
        api = client.CoreV1Api(self.api_client)
        try:
            response = api.read_namespaced_pod_log(
                name, namespace, tail_lines=tail_lines, _request_timeout=self._timeout, _preload_content=False
            )
            data: bytes = response.data
        except _CAUGHT as exc:
            raise classify(exc) from exc
        return data.decode("utf-8", errors="replace")

    def service_proxy_get(self, namespace: str, service: str, port: int, path: str, query: Mapping[str, str]) -> bytes:
        """GET ``path`` (with ``query``) from a Service through the API server's proxy, as the portal's own
        identity; answers the body. The backend's credentials go in ``query`` (e.g. Jupyter's ``token``):
        the ``Authorization`` header carries the API server's."""
        resource = f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/{path.lstrip('/')}"
        try:
            response = self.api_client.call_api(
                resource,
                "GET",
                query_params=list(query.items()),
                auth_settings=["BearerToken"],
                _request_timeout=self._timeout,
                _preload_content=False,
            )[0]
            data: bytes = response.data
        except _CAUGHT as exc:
            raise classify(exc) from exc
        return data

    def events_for(self, namespace: str, kind: str, name: str) -> Objects:
        """Events about one object, oldest first."""
        answer = self._call(
            _KINDS["Event"],
            "list",
            namespace,
            field_selector=f"involvedObject.kind={kind},involvedObject.name={name}",
        )
        events: Objects = answer.get("items") or []
        return sorted(events, key=_event_time)

    def patch_node_labels(self, name: str, labels: Mapping[str, str | None]) -> JSON:
        """Set (or, with None, remove) labels on a node; answers the node."""
        patch = {"metadata": {"labels": dict(labels)}}
        return self._call(_KINDS["Node"], "patch", None, name=name, body=patch)

    def patch_node(self, name: str, labels: Mapping[str, str | None], unschedulable: bool) -> JSON:
        """Set (None: remove) labels on a node and cordon it (``unschedulable``) or uncordon it, in one
        patch; answers the node."""
        patch = {"metadata": {"labels": dict(labels)}, "spec": {"unschedulable": True if unschedulable else None}}
        return self._call(_KINDS["Node"], "patch", None, name=name, body=patch)

    def scale_job(self, namespace: str, name: str, workers: int) -> JSON | None:
        """Set an elastic training job's size: its Indexed Job's parallelism and completions together (Kubernetes
        1.27+ lets both change while they stay equal: new indexes start, the highest go on scale-down), in
        one merge patch. Answers the Job, or None when there is none (not created yet, or gone)."""
        patch = {"spec": {"parallelism": workers, "completions": workers}}
        try:
            return self._call(_KINDS["Job"], "patch", namespace, name=name, body=patch)
        except PermanentKubeError as exc:
            if exc.status == 404:
                return None
            raise


class WatchStream:
    """An open watch: iterating it yields events as plain dicts (``type``: ADDED, MODIFIED, DELETED,
    BOOKMARK or ERROR; ``object``: the object, or a Status for ERROR) until the server ends the stream.
    Each line is decoded with ``orjson.loads`` only: the client's model classes would cost far more. A
    broken or timed-out stream raises TransientKubeError. :meth:`close` may be called from another
    thread: it shuts the socket for reading, so a read blocked on it returns and the iteration ends."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._reading = False
        self.closed = False

    def __iter__(self) -> Iterator[JSON]:
        self._reading = True
        pending = b""
        try:
            for chunk in self._response.stream(amt=None):
                if b"\n" not in chunk:
                    pending += chunk
                    continue
                data = pending + chunk
                end = data.rindex(b"\n")  # decoded up to there: a character may straddle chunks, never a newline
                pending = data[end + 1 :]
                for line in data[:end].split(b"\n"):
                    if line and not line.isspace():
                        event: JSON = orjson.loads(line)  # bytes: orjson checks the UTF-8 itself
                        yield event
        except (*_CAUGHT, ValueError, AttributeError) as exc:
            # Once closed, whatever the interrupted read raises is the end of the stream. Before that,
            # ValueError is a garbled line (and AttributeError/ValueError a file closed under the read).
            if not self.closed:
                raise classify(exc) from exc
        finally:
            self._reading = False
            self._release()

    def close(self) -> None:
        """End the stream; safe from any thread, and more than once. Only the socket is shut here while
        another thread reads: that read returns, and the reading thread releases the connection."""
        self.closed = True
        with suppress(ValueError, OSError, AttributeError):  # no socket (any more) to shut
            self._response.shutdown()
        if not self._reading:
            self._release()

    def _release(self) -> None:
        with suppress(ValueError, OSError, AttributeError):
            self._response.close()
            self._response.release_conn()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _event_time(event: JSON) -> str:
    # RFC 3339 timestamps sort as strings; series events carry only eventTime.
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or event.get("metadata", {}).get("creationTimestamp")
        or ""
    )
