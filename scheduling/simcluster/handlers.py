"""HTTP routing: Kubernetes REST paths onto the cluster's operations, with the real content negotiation
(server-side Tables for kubectl), chunked watch streams and Status bodies for errors."""

from __future__ import annotations

import json
import logging
import queue
import ssl
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from scheduling.simcluster import auth, discovery, openapi, tables
from scheduling.simcluster.api_deletion import DeleteOptions
from scheduling.simcluster.encoding import Encodings, dumps
from scheduling.simcluster.errors import ApiError, bad_request, method_not_allowed, not_found
from scheduling.simcluster.proxy import ProxyRequest
from scheduling.simcluster.resources import ResourceType, lookup
from scheduling.simcluster.store import BOOKMARK, ERROR, Watcher

if TYPE_CHECKING:
    from scheduling.simcluster.server import SimServer

JSON = dict[str, Any]
log = logging.getLogger(__name__)

BOOKMARK_EVERY_S = 5.0
WATCH_BATCH_EVENTS = 256  # events sent in one chunk at most, when that many are waiting
DEFAULT_WATCH_TIMEOUT_S = 1800


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        """The request body; JSON or YAML (protobuf, which only kubectl's typed commands send, is refused)."""
        if not self.body:
            return None
        content_type = self.headers.get("content-type", "application/json").split(";", 1)[0].strip()
        if content_type == "application/yaml":
            try:
                return yaml.safe_load(self.body)
            except yaml.YAMLError as exc:
                raise bad_request(f"couldn't get version/kind; yaml parse error: {exc}") from exc
        if content_type not in ("application/json", "") and not content_type.endswith("+json"):
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types include: "
                f'application/json, application/yaml; got "{content_type}"',
            )
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc

    def flag(self, name: str) -> bool:
        return self.query.get(name, "").lower() in ("true", "1")

    @property
    def wants_table(self) -> bool:
        return "as=Table" in self.headers.get("accept", "")


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None

    @classmethod
    def json(cls, status: int, payload: Any) -> Response:
        return cls(status, dumps(payload))

    @classmethod
    def text(cls, status: int, text: str, content_type: str = "text/plain; charset=utf-8") -> Response:
        return cls(status, text.encode(), content_type)


@dataclass(frozen=True)
class Target:
    """A parsed resource path."""

    rtype: ResourceType
    namespace: str | None  # None: across all namespaces (or cluster-scoped)
    name: str
    subresource: str
    rest: str  # what follows `proxy/`


class Router:
    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.cluster = sim.cluster
        self.encodings = Encodings()

    def dispatch(self, req: Request) -> Response:
        authenticated = auth.authenticate(req.path, req.headers, self.sim.token)
        if authenticated:
            # As the real server does: a backend behind the proxy never sees the API server's credentials.
            req.headers.pop("authorization", None)
        parts = [p for p in req.path.split("/") if p]
        if parts[:1] == ["_sim"]:
            status, payload = self.sim.admin(req.method, parts[1:], req.json())
            return Response.json(status, payload)
        if not _is_resource_path(parts):
            self._inject(req.method.lower(), req.path.rstrip("/") or "/", "")  # /version/ is /version
        return self._route(req, parts)

    def _inject(self, verb: str, resource: str, namespace: str) -> None:
        """Delay and/or fail this call as a pending fault says."""
        fault = self.sim.faults.take(verb, resource, namespace)
        if fault is None:
            return
        if fault.delay_s:
            time.sleep(fault.delay_s)
        if fault.status:
            raise ApiError(
                fault.status, fault.reason, fault.text, retry_after_seconds=1 if fault.status == 429 else None
            )

    def _route(self, req: Request, parts: list[str]) -> Response:
        if not parts:
            return Response.json(200, {"paths": ["/api", "/api/v1", "/apis", "/metrics", "/version"]})
        head = parts[0]
        if head in ("healthz", "readyz", "livez"):
            return Response.text(200, "ok")
        if head == "version":
            return Response.json(200, discovery.SERVER_VERSION)
        if head == "openapi" and parts[1:] == ["v2"]:
            if "protobuf" in req.headers.get("accept", ""):
                return Response(200, openapi.v2_protobuf(), openapi.PROTOBUF_TYPE)
            raise ApiError(406, "NotAcceptable", "only the protobuf encoding of /openapi/v2 is served")
        if head == "metrics":
            return Response.text(200, self.sim.metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
        if head == "api":
            if len(parts) == 1:
                return Response.json(200, discovery.api_versions(self.sim.address))
            return self._group_version(req, "", parts[1], parts[2:])
        if head == "apis":
            if len(parts) == 1:
                return Response.json(200, discovery.api_group_list())
            if len(parts) == 2:
                group = discovery.api_group(parts[1])
                if group is None:
                    raise _path_not_found(req.path)
                return Response.json(200, group)
            return self._group_version(req, parts[1], parts[2], parts[3:])
        raise _path_not_found(req.path)

    def _group_version(self, req: Request, group: str, version: str, rest: list[str]) -> Response:
        if not rest:
            doc = discovery.resource_list(group, version)
            if doc is None:
                raise _path_not_found(req.path)
            return Response.json(200, doc)
        target = self._target(req, group, version, rest)
        verb = self._verb(req, target)
        resource = target.rtype.plural + (f"/{target.subresource}" if target.subresource else "")
        self._inject(verb, resource, target.namespace or "")
        if target.subresource:
            return self._subresource(req, target)
        return self._resource(req, target, verb)

    def _target(self, req: Request, group: str, version: str, rest: list[str]) -> Target:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        rtype = lookup(group, version, rest[0])
        if rtype is None:
            raise _path_not_found(req.path)
        if namespace is not None and not rtype.namespaced:
            raise _path_not_found(req.path)
        if namespace is None and rtype.namespaced and len(rest) > 1:
            raise _path_not_found(req.path)
        if not rtype.namespaced:
            namespace = ""
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        if sub and sub not in rtype.subresources:
            raise _path_not_found(req.path)
        remainder = ""
        if sub == "proxy":
            marker = f"/{name}/proxy"
            remainder = req.path[req.path.index(marker) + len(marker) :]
        elif len(rest) > 3:
            raise _path_not_found(req.path)
        return Target(rtype, namespace, name, sub, remainder)

    @staticmethod
    def _verb(req: Request, target: Target) -> str:
        method = req.method
        if target.subresource:
            return {"GET": "get", "PUT": "update", "PATCH": "patch", "POST": "create"}.get(method, method.lower())
        if not target.name:
            if method == "GET":
                return "watch" if req.flag("watch") else "list"
            return {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
        return {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())

    # -- main resources ---------------------------------------------------------------------------

    def _resource(self, req: Request, target: Target, verb: str) -> Response:
        rtype, namespace, name = target.rtype, target.namespace, target.name
        dry_run = "dryRun" in req.query
        strict = req.query.get("fieldValidation", "Strict") == "Strict"
        if verb == "get":
            return self._object(req, rtype, self.cluster.get(rtype, namespace or "", name))
        if verb == "list":
            items, meta = self.cluster.select(
                rtype,
                namespace or None,
                label_selector=req.query.get("labelSelector", ""),
                field_selector=req.query.get("fieldSelector", ""),
                limit=int(req.query.get("limit") or 0),
                continue_token=req.query.get("continue", ""),
            )
            if req.wants_table:
                return Response.json(200, self._table(req, rtype, items, meta))
            head = {"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": meta}
            return Response(200, self.encodings.listing(head, items))
        if verb == "watch":
            return self._watch(req, rtype, namespace or None)
        if verb == "create":
            if namespace is None:
                raise method_not_allowed()
            created = self.cluster.create(rtype, namespace, req.json(), dry_run=dry_run, strict=strict)
            return self._object(req, rtype, created, 201)
        if verb == "update":
            updated = self.cluster.replace(rtype, namespace or "", name, req.json(), dry_run=dry_run, strict=strict)
            return self._object(req, rtype, updated)
        if verb == "patch":
            patched = self.cluster.patch(
                rtype,
                namespace or "",
                name,
                req.headers.get("content-type", ""),
                req.body,
                dry_run=dry_run,
                strict=strict,
            )
            return self._object(req, rtype, patched)
        if verb == "delete":
            options = DeleteOptions.parse(req.json(), req.query)
            result = self.cluster.delete(rtype, namespace or "", name, options)
            return Response.json(200, result)
        if verb == "deletecollection":
            options = DeleteOptions.parse(req.json(), req.query)
            result = self.cluster.delete_collection(
                rtype,
                namespace or None,
                options,
                label_selector=req.query.get("labelSelector", ""),
                field_selector=req.query.get("fieldSelector", ""),
            )
            return Response.json(200, result)
        raise method_not_allowed()

    def _object(self, req: Request, rtype: ResourceType, obj: JSON, status: int = 200) -> Response:
        if req.wants_table:
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            return Response.json(status, self._table(req, rtype, [obj], meta))
        return Response(status, self.encodings.object(obj))

    def _table(self, req: Request, rtype: ResourceType, items: list[JSON], meta: JSON, columns: bool = True) -> JSON:
        return tables.table(
            rtype.store_key if rtype.group != "events.k8s.io" else "",
            items,
            self.sim.clock.now(),
            list_meta=meta,
            include_object=req.query.get("includeObject", "Metadata"),
            with_columns=columns,
            kind=rtype.kind,
            api_version=rtype.api_version,
        )

    # -- watch ------------------------------------------------------------------------------------

    def _watch(self, req: Request, rtype: ResourceType, namespace: str | None) -> Response:
        try:
            watcher = self.cluster.watch(
                rtype,
                namespace,
                label_selector=req.query.get("labelSelector", ""),
                field_selector=req.query.get("fieldSelector", ""),
                resource_version=req.query.get("resourceVersion", ""),
            )
        except ApiError as exc:
            if exc.code != 410:
                raise
            # The real server reports an expired resourceVersion inside the stream, with HTTP 200.
            line = dumps({"type": ERROR, "object": exc.status()}) + b"\n"
            return Response(200, stream=iter([line]))
        timeout = float(req.query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_S)
        return Response(200, stream=self._stream(req, rtype, watcher, timeout))

    def _stream(self, req: Request, rtype: ResourceType, watcher: Watcher, timeout: float) -> Iterator[bytes]:
        deadline = time.monotonic() + timeout
        bookmarks = req.flag("allowWatchBookmarks")
        first = True
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                try:
                    item = watcher.events.get(timeout=min(remaining, BOOKMARK_EVERY_S))
                except queue.Empty:
                    if bookmarks:
                        rv = str(self.cluster.store.resource_version)
                        mark = {
                            "kind": rtype.kind,
                            "apiVersion": rtype.api_version,
                            "metadata": {"resourceVersion": rv},
                        }
                        yield dumps({"type": BOOKMARK, "object": mark}) + b"\n"
                    continue
                # What is already waiting goes out with it, flushed once: kube-apiserver's watch server, too,
                # flushes only when its channel is empty. One event per write cost a wakeup, a TLS record and
                # a read on both sides for every event of a busy stream.
                lines: list[bytes] = []
                while item is not None:
                    kind, obj = item
                    shown = self.cluster.present(rtype, obj)
                    if req.wants_table:
                        meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                        shown = self._table(req, rtype, [shown], meta, columns=first)
                        first = False
                    # A table or an events.k8s.io view is built for this answer alone: nothing to keep.
                    lines.append(
                        self.encodings.event(kind, shown)
                        if shown is obj
                        else dumps({"type": kind, "object": shown}) + b"\n"
                    )
                    if len(lines) >= WATCH_BATCH_EVENTS:
                        break
                    try:
                        item = watcher.events.get_nowait()
                    except queue.Empty:
                        break
                if lines:
                    yield b"".join(lines)
                if item is None:
                    return  # the watcher was closed (cut off, or the server stops)
        finally:
            self.cluster.store.unwatch(watcher)

    # -- subresources -----------------------------------------------------------------------------

    def _subresource(self, req: Request, target: Target) -> Response:
        rtype, namespace, name, sub = target.rtype, target.namespace or "", target.name, target.subresource
        if sub == "status":
            if req.method == "GET":
                return Response.json(200, self.cluster.get(rtype, namespace, name))
            if req.method == "PUT":
                return Response.json(
                    200, self.cluster.replace(rtype, namespace, name, req.json(), subresource="status")
                )
            if req.method == "PATCH":
                patched = self.cluster.patch(
                    rtype,
                    namespace,
                    name,
                    req.headers.get("content-type", ""),
                    req.body,
                    subresource="status",
                )
                return Response.json(200, patched)
            raise method_not_allowed()
        if sub == "log" and req.method == "GET":
            text_or_stream = self.sim.pod_log(namespace, name, req.query)
            if isinstance(text_or_stream, str):
                return Response.text(200, text_or_stream)
            return Response(200, content_type="text/plain; charset=utf-8", stream=text_or_stream)
        if sub == "eviction" and req.method == "POST":
            return Response.json(201, self.sim.evict(namespace, name, req.json() or {}))
        if sub == "binding" and req.method == "POST":
            return Response.json(201, self.sim.bind(namespace, name, req.json() or {}))
        if sub == "proxy":
            prefix = req.path[: len(req.path) - len(target.rest)] if target.rest else req.path
            answer = self.sim.proxy(
                ProxyRequest(rtype.plural, namespace, name, target.rest, req.query, req.headers, prefix)
            )
            return Response(answer.status, answer.body, answer.content_type, dict(answer.headers))
        raise method_not_allowed()


def _is_resource_path(parts: list[str]) -> bool:
    """Whether the path names resources (`/api/v1/pods...`, `/apis/batch/v1/jobs...`), not discovery."""
    return (parts[:1] == ["api"] and len(parts) > 2) or (parts[:1] == ["apis"] and len(parts) > 3)


def _path_not_found(path: str) -> ApiError:
    error = not_found("", "")
    error.message = "the server could not find the requested resource"
    error.name = error.kind = ""
    return error


# -- the HTTP server --------------------------------------------------------------------------------


class PlainDoorRouter(Router):
    """The plain-HTTP door, for what reaches a real cluster without credentials: the service and pod proxy
    for browsers (as `kubectl proxy` serves it on the same machine: no certificate to accept, no token in the
    browser) and the DCGM exporter's `/metrics` for scrapers (each node's dcgm-exporter serves plain HTTP on
    :9400). Nothing else: the API itself stays behind TLS and the bearer token."""

    def dispatch(self, req: Request) -> Response:
        if req.path.rstrip("/") == "/metrics" and req.method == "GET":
            return Response.text(200, self.sim.metrics_text(), "text/plain; version=0.0.4; charset=utf-8")
        if not auth.is_proxy_path(req.path):
            raise _path_not_found(req.path)
        return super().dispatch(req)


class ApiHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    router: Router
    ssl_context: ssl.SSLContext | None = None  # None: plain HTTP (PlainDoorRouter)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        if self.ssl_context is None:
            return sock, address
        # The TLS handshake happens on the first read, in the request's thread: a slow client never holds
        # up the accept loop.
        return self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hang up on keep-alive connections all the time; only anything else is worth a trace.
        if not isinstance(sys.exc_info()[1], ConnectionError | ssl.SSLError):
            log.exception("simcluster: request from %s failed", client_address)


class ApiRequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm and the client's
    # delayed ACK hold every response back by tens of milliseconds.
    disable_nagle_algorithm = True
    server: ApiHTTPServer

    def do_GET(self) -> None:
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Request(self.command, unquote(url.path), query, headers, body)
        try:
            resp = self.server.router.dispatch(req)
        except ApiError as exc:
            resp = Response.json(exc.code, exc.status())
            if exc.retry_after_seconds is not None:
                resp.headers["Retry-After"] = str(exc.retry_after_seconds)
        except Exception as exc:
            log.exception("simcluster: %s %s failed", self.command, self.path)
            resp = Response.json(500, ApiError(500, "InternalError", f"Internal error occurred: {exc}").status())
        self._write(resp)

    def _write(self, resp: Response) -> None:
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in resp.headers.items():
            self.send_header(key, value)
        if resp.stream is None:
            self.send_header("Content-Length", str(len(resp.body)))
            self.end_headers()
            self.wfile.write(resp.body)
            return
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            for chunk in resp.stream:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            close = getattr(resp.stream, "close", None)
            if close is not None:
                close()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("simcluster %s - %s", self.address_string(), format % args)
