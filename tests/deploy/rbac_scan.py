"""What the portal's code asks of the Kubernetes API, as RBAC sees it: (apiGroup, resource, verb).

Two steps, so that neither a naming convention nor a hand-kept table can drift from the code:

1. An AST scan of the product's modules finds every call site: the ``Kube`` wrapper's methods on a receiver
   known to be a ``Kube`` (a parameter annotated ``Kube``, a name bound to ``kube()``, or ``kube()`` itself),
   and direct calls of the official client's API methods (``CoreV1Api.list_pod_for_all_namespaces``, ...).
   A kind given as a string literal is taken as it is; one held in a variable stands for every kind the
   module names; ``ensure(obj)`` creates what the manifest builders build (``kind=`` in manifests.py).
   An informer (``informer_for(kube, kind)`` or ``Informer(kube, kind)``) stands for the Kube calls its
   thread makes (scheduling/kube/informer.py, read for its ``self.<kube>.<method>(...)`` calls), of that
   kind and across all namespaces, charged to the module that starts it: the thread runs in its process.
2. Each call site is then *run*, through the real wrapper and the real client, against an ``ApiClient`` that
   records the HTTP requests instead of sending them (a create answers 409 AlreadyExists, so ``ensure``'s
   read is recorded too). HTTP method and path become verb and resource as the API server's RequestInfo
   does: ``GET .../pods`` is list (watch with ``?watch=true``), ``GET .../pods/x/log`` is get pods/log,
   ``GET .../services/x:8888/proxy/...`` is get services/proxy, ``/version`` a non-resource URL.

Which pod runs a call decides whose ServiceAccount needs it: the worker runs ``scheduling/loops/`` (through
``scheduling/tasks.py``); everything else (pages, API, /readyz, management commands run in a web pod) is web,
except a call on a Kube a function received as a parameter (``kube: Kube``): web code may not hand the Kube it
made to another function (the scan refuses that), so a Kube received comes from the worker's code (the
scheduling cycle hands its Kube to ``scheduling/live_capacity.py``, say).
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes.client
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.exceptions import ApiException

from scheduling.kube import calls
from scheduling.kube.calls import Kube

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("portal", "workspaces", "scheduling")
# Not part of a deployment: the simulated cluster, the benchmarks (they run against it) and the demo's commands.
EXCLUDED = (
    "scheduling/simcluster/",
    "scheduling/benchmarks/",
    "scheduling/management/commands/bench_",
    "portal/management/commands/rundemo.py",
    "portal/management/commands/seed_demo.py",
    "/migrations/",
    "scheduling/nvml_agent/",  # a process of its own on each GPU node, without API access (docs/nvml-agent.md)
)
WRAPPER = "scheduling/kube/calls.py"  # run, not scanned: its call sites are
INFORMER = "scheduling/kube/informer.py"  # not scanned as a module: charged to whoever starts an informer
INFORMER_FACTORIES = frozenset({"informer_for", "Informer"})
MANIFESTS = "scheduling/kube/manifests.py"  # what Kube.ensure is handed
WORKER_MODULES = ("scheduling/loops/", "scheduling/tasks.py")
KINDS = calls._KINDS
KUBE_METHODS = frozenset(n for n, f in vars(Kube).items() if not n.startswith("_") and callable(f))
NAMESPACE = "team-x"

Attr = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb); non-resource: ("nonResourceURL", path, verb)


class ScanError(AssertionError):
    """The scan met code it cannot attribute; teach it rather than guess."""


@dataclass(frozen=True)
class Site:
    module: str
    line: int
    method: str  # a Kube method, or "<ApiClass>.<method>" for a direct client call
    kinds: tuple[str, ...] = ()
    namespaced: bool = True  # False: the namespace argument is a literal None (all namespaces)
    constants: tuple[tuple[str, Any], ...] = ()  # literal keyword arguments of a direct call (watch=True, ...)
    handed: bool = False  # on a Kube the function received as a parameter: the worker's (see the docstring)

    @property
    def identity(self) -> str:
        return "worker" if self.module.startswith(WORKER_MODULES) or self.handed else "web"


def _api_classes() -> dict[str, type]:
    return {
        name: cls
        for name, cls in vars(kubernetes.client).items()
        if inspect.isclass(cls) and name.endswith("Api") and name != "ApiClient"
    }


API_CLASSES = _api_classes()
API_METHODS: dict[str, list[str]] = {}
for _name, _cls in API_CLASSES.items():
    for _method in vars(_cls):
        if not _method.startswith("_") and not _method.endswith("_with_http_info"):
            API_METHODS.setdefault(_method, []).append(_name)


def product_modules() -> Iterator[tuple[str, str]]:
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not any(part in rel for part in EXCLUDED) and rel not in (WRAPPER, INFORMER):
                yield rel, path.read_text()


def _string_constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


@cache
def manifest_kinds() -> tuple[str, ...]:
    tree = ast.parse((ROOT / MANIFESTS).read_text())
    kinds = {
        kw.value.value
        for call in ast.walk(tree)
        if isinstance(call, ast.Call)
        for kw in call.keywords
        if kw.arg == "kind" and isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, str)
    }
    unknown = kinds - set(KINDS)
    if unknown:
        raise ScanError(f"{MANIFESTS} builds kinds the wrapper cannot create: {sorted(unknown)}")
    return tuple(sorted(kinds))


@cache
def informer_calls() -> tuple[str, ...]:
    """The Kube methods an informer's thread calls: ``self.<name>.<method>(...)`` in informer.py, where
    ``__init__`` stored a parameter annotated ``Kube`` as ``self.<name>``."""
    tree = ast.parse((ROOT / INFORMER).read_text())
    methods: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        params = _kube_names(init) if init else set()
        holders = {
            target.attr
            for node in ast.walk(init or cls)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params
            for target in node.targets
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
        }
        for call in ast.walk(cls):
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            receiver = call.func.value
            if (
                isinstance(receiver, ast.Attribute)
                and receiver.attr in holders
                and isinstance(receiver.value, ast.Name)
                and receiver.value.id == "self"
            ):
                if call.func.attr not in KUBE_METHODS:
                    raise ScanError(f"{INFORMER}:{call.lineno}: Kube has no method {call.func.attr!r}")
                methods.add(call.func.attr)
    if not methods:
        raise ScanError(f"{INFORMER}: no Kube call found; an informer's thread must call through self.<kube>")
    return tuple(sorted(methods))


def _informer_kinds(node: ast.Call, module_kinds: tuple[str, ...], where: str) -> tuple[str, ...] | None:
    """The kinds of ``informer_for(kube, kind)`` / ``Informer(kube, kind)``; None for any other call."""
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if name not in INFORMER_FACTORIES:
        return None
    arg = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "kind"), None)
    return _kinds_of(arg, module_kinds, where)


def _is_kube_factory(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "kube" and not node.args


def _annotated_kube(annotation: ast.expr | None) -> bool:
    if isinstance(annotation, ast.Name):
        return annotation.id == "Kube"
    if isinstance(annotation, ast.Attribute):
        return annotation.attr == "Kube"
    if isinstance(annotation, ast.Constant):
        return annotation.value == "Kube"
    return False


def _api_constructor(node: ast.AST) -> str | None:
    """``client.CoreV1Api(...)`` or ``CoreV1Api(...)``: the class name."""
    if not isinstance(node, ast.Call):
        return None
    name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    return name if name in API_CLASSES else None


def _api_names(func: ast.AST) -> dict[str, str]:
    """Names bound to an API object in a scope: ``core = client.CoreV1Api(api)``."""
    names: dict[str, str] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and (cls := _api_constructor(node.value)):
            names.update((t.id, cls) for t in node.targets if isinstance(t, ast.Name))
    return names


def _kube_names(func: ast.AST) -> set[str]:
    """Names that hold a Kube inside a function (or module): annotated parameters and ``x = kube()``."""
    return _kube_params(func) | _kube_made(func)


def _kube_params(func: ast.AST) -> set[str]:
    """A function's parameters annotated ``Kube``: a Kube handed to it."""
    if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        return set()
    args = func.args
    return {arg.arg for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs] if _annotated_kube(arg.annotation)}


def _kube_made(func: ast.AST) -> set[str]:
    """Names bound to ``kube()`` in a function (or module): a Kube made there."""
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and _is_kube_factory(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_handed(node: ast.expr | None, params: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in params


def _kinds_of(arg: ast.expr | None, module_kinds: tuple[str, ...], where: str) -> tuple[str, ...]:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        if arg.value not in KINDS:
            raise ScanError(f"{where}: unknown kind {arg.value!r}")
        return (arg.value,)
    if not module_kinds:
        raise ScanError(f"{where}: the kind is a variable and the module names no kind")
    return module_kinds


def scan_source(module: str, source: str) -> list[Site]:
    tree = ast.parse(source)
    module_kinds = tuple(sorted(_string_constants(tree) & set(KINDS)))
    ensured = manifest_kinds()
    sites: list[Site] = []
    scopes: list[ast.AST] = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
    ]
    seen: set[int] = set()
    if not module.startswith("scheduling/kube/"):
        for node in ast.walk(tree):
            if _api_constructor(node):
                raise ScanError(
                    f"{module}:{getattr(node, 'lineno', 0)}: a Kubernetes API object outside scheduling/kube/"
                )
    module_holders, module_apis = _kube_names(tree), _api_names(tree)
    # Innermost scope first, so a call is judged with the names its own function binds.
    for scope in reversed(scopes):
        holders = _kube_names(scope) | module_holders
        params = _kube_params(scope) - _kube_made(scope) - module_holders
        apis = _api_names(scope) | module_apis
        for node in ast.walk(scope):
            if not isinstance(node, ast.Call) or id(node) in seen:
                continue
            where = f"{module}:{node.lineno}"
            func = node.func
            informed = _informer_kinds(node, module_kinds, where)
            if informed is not None:
                seen.add(id(node))
                given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kube"), None)
                handed = _is_handed(given, params)
                sites.extend(Site(module, node.lineno, m, informed, False, handed=handed) for m in informer_calls())
                continue
            if isinstance(func, ast.Attribute):
                receiver = func.value
                is_kube = (isinstance(receiver, ast.Name) and receiver.id in holders) or _is_kube_factory(receiver)
                if is_kube:
                    seen.add(id(node))
                    if func.attr not in KUBE_METHODS:
                        raise ScanError(f"{where}: Kube has no method {func.attr!r}")
                    site = _wrapper_site(module, node, func.attr, module_kinds, ensured)
                    sites.append(replace(site, handed=_is_handed(receiver, params)))
                    continue
                if func.attr == "call_api":
                    raise ScanError(f"{where}: a raw call_api outside {WRAPPER}; route it through Kube")
                cls = _api_constructor(receiver) or (apis.get(receiver.id) if isinstance(receiver, ast.Name) else None)
                if cls is not None:
                    seen.add(id(node))
                    if func.attr not in API_METHODS or cls not in API_METHODS[func.attr]:
                        raise ScanError(f"{where}: {cls} has no method {func.attr!r}")
                    sites.append(_direct_site(module, node, f"{cls}.{func.attr}"))
                    continue
            if isinstance(func, ast.Attribute | ast.Name):
                name = func.attr if isinstance(func, ast.Attribute) else func.id
                if name == "Watch":
                    raise ScanError(f"{where}: kubernetes.watch.Watch; the scan does not follow streams yet")
            if module.startswith(WORKER_MODULES):
                continue
            made = holders - params
            if any(
                _is_kube_factory(a) or (isinstance(a, ast.Name) and a.id in made)
                for a in [*node.args, *(k.value for k in node.keywords)]
            ):
                raise ScanError(f"{where}: web code hands a Kube to another function; its calls would be unattributed")
    return sites


def _wrapper_site(
    module: str, node: ast.Call, method: str, module_kinds: tuple[str, ...], ensured: tuple[str, ...]
) -> Site:
    where = f"{module}:{node.lineno}"
    params = list(inspect.signature(getattr(Kube, method)).parameters)[1:]
    kinds: tuple[str, ...] = ()
    namespaced = True
    if method == "ensure":
        kinds = ensured
    elif params and params[0] == "kind":
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "kind"), None)
        kinds = _kinds_of(arg, module_kinds, where)
    if "namespace" in params:
        index = params.index("namespace")
        arg = node.args[index] if len(node.args) > index else None
        arg = arg or next((k.value for k in node.keywords if k.arg == "namespace"), None)
        namespaced = not (isinstance(arg, ast.Constant) and arg.value is None)
    return Site(module, node.lineno, method, kinds, namespaced)


def _direct_site(module: str, node: ast.Call, method: str) -> Site:
    constants = tuple(
        (k.arg, k.value.value)
        for k in node.keywords
        if k.arg and not k.arg.startswith("_") and isinstance(k.value, ast.Constant)
    )
    return Site(module, node.lineno, method, (), True, constants)


def scan() -> list[Site]:
    return [site for module, source in product_modules() for site in scan_source(module, source)]


# -- running a call site against a recording client ---------------------------------------------------------


class _Response:
    """Enough of urllib3's response for the client: every read answers an empty list / a bare object."""

    status = 200
    reason = "OK"
    data = json.dumps({"items": [], "metadata": {"name": "x"}, "gitVersion": "v1.34.0"}).encode()

    def getheaders(self) -> dict[str, str]:
        return {"content-type": "application/json"}

    def getheader(self, name: str, default: str | None = None) -> str | None:
        return self.getheaders().get(name.lower(), default)


class RecordingClient(ApiClient):  # type: ignore[misc]
    def __init__(self) -> None:
        configuration = Configuration(host="https://kubernetes.invalid")
        configuration.api_key = {"authorization": "Bearer recorded"}
        super().__init__(configuration)
        self.requests: list[tuple[str, str, list[tuple[str, Any]]]] = []

    def request(self, method: str, url: str, query_params: Any = None, *args: Any, **kwargs: Any) -> Any:
        self.requests.append((method, url, list(query_params or [])))
        if method == "POST":  # drive Kube.ensure on to its read of the existing object
            raise _Conflict()
        return _Response()


class _Conflict(ApiException):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__(status=409, reason="Conflict")
        self.body = json.dumps({"reason": "AlreadyExists", "message": "exists"})


def _sample(param: str, position: int, kind: str | None, namespaced: bool) -> Any:
    if param == "kind":
        return kind if position == 0 else "Pod"
    if param == "namespace":
        return NAMESPACE if namespaced else None
    if param == "obj":
        assert kind is not None
        meta = {"name": "x", **({"namespace": NAMESPACE} if KINDS[kind].namespaced else {})}
        return {"apiVersion": KINDS[kind].api_version, "kind": kind, "metadata": meta}
    samples: dict[str, Any] = {
        "name": "x",
        "service": "x",
        "port": 8888,
        "path": "/api/kernels",
        "query": {"token": "t"},
        "labels": {"example.org/a": "b"},
        "label_selector": "",
        "resource_version": "1",
        "unschedulable": True,
        "workers": 2,
    }
    if param not in samples:
        raise ScanError(f"no sample value for Kube parameter {param!r}; add one")
    return samples[param]


def run_site(site: Site) -> list[tuple[str, str, list[tuple[str, Any]]]]:
    recorder = RecordingClient()
    if "." in site.method:
        cls_name, method = site.method.split(".")
        bound = getattr(API_CLASSES[cls_name](recorder), method)
        required = [
            p.name
            for p in inspect.signature(bound).parameters.values()
            if p.default is inspect.Parameter.empty and p.kind is p.POSITIONAL_OR_KEYWORD
        ]
        kwargs = dict(site.constants)
        args = [NAMESPACE if p == "namespace" else "x" for p in required if p not in kwargs]
        _call_recorded(bound, *args, _preload_content=False, **kwargs)
        return recorder.requests
    kube = Kube(recorder, timeout=1)
    params = [
        p
        for p in inspect.signature(getattr(kube, site.method)).parameters.values()
        if p.default is inspect.Parameter.empty
    ]
    for kind in site.kinds or (None,):
        args = [_sample(p.name, i, kind, site.namespaced) for i, p in enumerate(params)]
        _call_recorded(getattr(kube, site.method), *args)
    return recorder.requests


def _call_recorded(method: Any, *args: Any, **kwargs: Any) -> None:
    with suppress(calls.KubeError):  # a refusal the wrapper classified; the request was recorded before it
        method(*args, **kwargs)


# -- HTTP request -> RBAC attributes (the API server's RequestInfo) -------------------------------------------

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def attributes(method: str, url: str, query: list[tuple[str, Any]]) -> Attr:
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return ("nonResourceURL", "/" + "/".join(parts), method.lower())
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]  # /namespaces/{ns}/<resource>...; /namespaces/{name} is the namespace itself
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    has_name = len(rest) > 1
    if method == "GET":
        watch = any(k == "watch" and str(v).lower() in ("true", "1") for k, v in query)
        verb = "get" if has_name else ("watch" if watch else "list")
    elif method == "DELETE":
        verb = "delete" if has_name else "deletecollection"
    else:
        verb = _VERBS[method]
    return (group, resource, verb)


def required() -> dict[str, set[Attr]]:
    needs: dict[str, set[Attr]] = {"web": set(), "worker": set()}
    for site in scan():
        for method, url, query in run_site(site):
            needs[site.identity].add(attributes(method, url, query))
    return needs


def granted(role: dict[str, Any]) -> set[Attr]:
    """A ClusterRole's rules, expanded; wildcards and resourceNames are refused (never least privilege here)."""
    rules: set[Attr] = set()
    for rule in role.get("rules", []):
        assert "resourceNames" not in rule, rule
        verbs = rule["verbs"]
        assert "*" not in verbs, rule
        for url in rule.get("nonResourceURLs", []):
            rules.update(("nonResourceURL", url, verb) for verb in verbs)
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                assert "*" not in (group, resource), rule
                rules.update((group, resource, verb) for verb in verbs)
    return rules
