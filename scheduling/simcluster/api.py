"""The API server's semantics, independent of HTTP: create, get, list, update, patch, delete and watch
with the real conventions (uids, generateName, resourceVersion and optimistic concurrency, status
subresources, finalizers, graceful pod deletion, garbage collection through ownerReferences, namespace
termination), plus the small interface the controllers write through."""

from __future__ import annotations

import base64
import binascii
import json
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import yaml

from scheduling.simcluster import events as event_shapes
from scheduling.simcluster import patch as patches
from scheduling.simcluster import selectors
from scheduling.simcluster.clock import SimClock, rfc3339
from scheduling.simcluster.errors import (
    ApiError,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    not_found,
    unsupported_media_type,
)
from scheduling.simcluster.kinds import SYSTEM_PRIORITY_CLASSES, kind_for
from scheduling.simcluster.patch import clone
from scheduling.simcluster.resources import NAMESPACES, PRIORITY_CLASSES, RESOURCES, SERVICES, ResourceType
from scheduling.simcluster.store import Store, TooOld, Watcher
from scheduling.simcluster.validation import check_schema, metadata_causes

JSON = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's SimpleNameGenerator
TERMINAL_PHASES = ("Succeeded", "Failed")
MAX_EVENTS = 50_000  # beyond this the oldest half goes, standing in for the real one-hour event TTL


@dataclass(frozen=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation: str | None = None  # Background, Foreground, Orphan; None: the resource's default
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False

    @classmethod
    def parse(cls, body: JSON | None, query: dict[str, str]) -> DeleteOptions:
        body = body or {}
        grace = body.get("gracePeriodSeconds", query.get("gracePeriodSeconds"))
        propagation = body.get("propagationPolicy") or query.get("propagationPolicy")
        orphan = body.get("orphanDependents", query.get("orphanDependents"))
        if propagation is None and orphan is not None:
            propagation = "Orphan" if str(orphan).lower() == "true" else "Background"
        if propagation not in (None, "Background", "Foreground", "Orphan"):
            raise bad_request(f'propagationPolicy: Unsupported value: "{propagation}"')
        pre = body.get("preconditions") or {}
        dry = body.get("dryRun") or ([query["dryRun"]] if "dryRun" in query else [])
        return cls(
            None if grace is None else int(grace),
            propagation,
            pre.get("uid"),
            pre.get("resourceVersion"),
            bool(dry),
        )


class Cluster:
    def __init__(self, *, clock: SimClock, seed: int = 0, store: Store | None = None) -> None:
        self.clock = clock
        self.store = store or Store()
        self.rng = random.Random(seed)  # noqa: S311 - reproducible names and uids, not secrets
        self._rng_lock = threading.Lock()
        self._next_service_ip = 10
        self._event_names: dict[tuple[str, str, str, str], tuple[str, str]] = {}
        self._event_clock = 0

    # -- small services ---------------------------------------------------------------------------

    def now_text(self) -> str:
        return rfc3339(self.clock.now())

    def new_uid(self) -> str:
        with self._rng_lock:
            return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def random_suffix(self, length: int = 5) -> str:
        with self._rng_lock:
            return "".join(self.rng.choice(_NAME_SUFFIX_ALPHABET) for _ in range(length))

    def allocate_service_ip(self) -> str:
        with self.store.lock:
            n = self._next_service_ip
            self._next_service_ip += 1
        return f"10.96.{n // 250}.{n % 250 + 1}"

    def list_objects(self, store_key: str, namespace: str | None = None) -> list[JSON]:
        return self.store.all(store_key, namespace)

    def get_object(self, store_key: str, namespace: str, name: str) -> JSON | None:
        return self.store.get(store_key, namespace, name)

    # -- presentation -----------------------------------------------------------------------------

    @staticmethod
    def present(rtype: ResourceType, obj: JSON) -> JSON:
        """The object as this group/version shows it (events.k8s.io reads core Events)."""
        if rtype.group == "events.k8s.io":
            return event_shapes.to_events_v1(obj)
        return obj

    # -- reads ------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str, name: str) -> JSON:
        obj = self.store.get(rtype.store_key, namespace, name)
        if obj is None:
            raise not_found(rtype.plural, name, rtype.group)
        return self.present(rtype, obj)

    def matcher(self, rtype: ResourceType, label_selector: str, field_selector: str) -> Callable[[JSON], bool]:
        try:
            requirements = selectors.parse_label_selector(label_selector or "")
            selectors.check_field_selector(field_selector or "", rtype.store_key)
            terms = selectors.parse_field_selector(field_selector or "")
        except selectors.SelectorError as exc:
            raise bad_request(str(exc)) from exc
        getters = selectors.selectable_fields(rtype.store_key)

        def matches(obj: JSON) -> bool:
            labels = obj["metadata"].get("labels") or {}
            return all(r.matches(labels) for r in requirements) and all(
                (getters[t.field](obj) == t.value) == (t.operator == "=") for t in terms
            )

        return matches

    def select(
        self,
        rtype: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        limit: int = 0,
        continue_token: str = "",
    ) -> tuple[list[JSON], JSON]:
        """Matching objects and the list metadata (resourceVersion, continue, remainingItemCount)."""
        matches = self.matcher(rtype, label_selector, field_selector)
        with self.store.lock:
            rv = self.store.resource_version
            objects = self.store.all(rtype.store_key, namespace)
        start_after = ""
        if continue_token:
            try:
                token = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                start_after = token["start"]
            except (ValueError, KeyError, binascii.Error) as exc:
                raise bad_request(f"continue key is not valid: {exc}") from exc
        items: list[JSON] = []
        remaining = 0
        next_token = ""
        for obj in objects:
            key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
            if start_after and key <= start_after:
                continue
            if not matches(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                continue
            items.append(self.present(rtype, obj))
            if limit and len(items) == limit:
                next_token = base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": key}).encode()).decode()
        meta: JSON = {"resourceVersion": str(rv)}
        if remaining:
            meta["continue"] = next_token
            meta["remainingItemCount"] = remaining
        return items, meta

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        *,
        label_selector: str = "",
        field_selector: str = "",
        resource_version: str = "",
    ) -> Watcher:
        matches = self.matcher(rtype, label_selector, field_selector)
        since: int | None = None
        if resource_version not in ("", "0"):
            try:
                since = int(resource_version)
            except ValueError as exc:
                raise bad_request(f'invalid resource version "{resource_version}"') from exc
        try:
            return self.store.watch(rtype.store_key, namespace, matches, since)
        except TooOld as exc:
            raise ApiError(410, "Expired", str(exc)) from exc

    # -- create -----------------------------------------------------------------------------------

    def _check_body(self, rtype: ResourceType, body: Any, namespace: str) -> JSON:
        if not isinstance(body, dict):
            raise bad_request(f"the object provided is unrecognized ({type(body).__name__})")
        obj: JSON = clone(body)
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if api_version and api_version != rtype.api_version:
            raise bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({rtype.api_version})"  # noqa: E501
            )
        if kind and kind != rtype.kind:
            raise bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})")
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if rtype.namespaced:
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        return obj

    @staticmethod
    def _to_storage(rtype: ResourceType, obj: JSON) -> JSON:
        """The stored shape of a validated object: events.k8s.io Events are kept as core Events."""
        return event_shapes.from_events_v1(obj) if rtype.group == "events.k8s.io" else obj

    def _check_namespace(self, rtype: ResourceType, namespace: str, name: str) -> None:
        if not rtype.namespaced:
            return
        ns = self.store.get("namespaces", "", namespace)
        if ns is None:
            raise not_found("namespaces", namespace)
        if ns.get("status", {}).get("phase") == "Terminating":
            why = f"unable to create new content in namespace {namespace} because it is being terminated"
            raise forbidden(rtype.plural, name, why, rtype.group)

    def create(
        self, rtype: ResourceType, namespace: str, body: Any, *, dry_run: bool = False, strict: bool = True
    ) -> JSON:
        obj = self._check_body(rtype, body, namespace)
        meta = obj["metadata"]
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + self.random_suffix()
        name = meta.get("name", "")
        rkind = kind_for(rtype.store_key)
        causes = check_schema(obj, rtype, strict=strict)
        obj = self._to_storage(rtype, obj)
        meta = obj["metadata"]
        for server_set in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation"):
            meta.pop(server_set, None)
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = self.now_text()
        causes.extend(metadata_causes(obj, rtype))
        with self.store.lock:
            self._check_namespace(rtype, namespace, name)
            obj = rkind.default(self, obj)
            meta = obj["metadata"]
            causes.extend(rkind.validate(self, obj, None))
            if causes:
                raise invalid(rtype.kind, name, causes, rtype.group)
            if self.store.get(rtype.store_key, meta.get("namespace", ""), name) is not None:
                raise already_exists(rtype.plural, name, rtype.group)
            if rkind.generation:
                meta["generation"] = 1
            if dry_run:
                return self.present(rtype, obj)
            return self.present(rtype, self.store.put(rtype.store_key, obj, created=True))

    # -- update and patch -------------------------------------------------------------------------

    def replace(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        body: Any,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = True,
    ) -> JSON:
        obj = self._check_body(rtype, body, namespace)
        if obj["metadata"].get("name") and obj["metadata"]["name"] != name:
            raise bad_request(
                f"the name of the object ({obj['metadata']['name']}) does not match the name on the URL ({name})"
            )
        obj["metadata"]["name"] = name
        causes = check_schema(obj, rtype, strict=strict)
        obj = self._to_storage(rtype, obj)
        with self.store.lock:
            old = self.store.get(rtype.store_key, namespace, name)
            if old is None:
                raise not_found(rtype.plural, name, rtype.group)
            wanted = obj["metadata"].get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise conflict(rtype.plural, name, rtype.group)
            return self._store_update(rtype, old, obj, subresource, causes, dry_run)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str,
        name: str,
        content_type: str,
        raw: bytes,
        *,
        subresource: str = "",
        dry_run: bool = False,
        strict: bool = True,
    ) -> JSON:
        content_type = content_type.split(";", 1)[0].strip()
        if content_type not in patches.PATCH_TYPES:
            raise unsupported_media_type(content_type)
        try:
            body = yaml.safe_load(raw) if content_type == patches.APPLY_PATCH else json.loads(raw or b"null")
        except (ValueError, yaml.YAMLError) as exc:
            raise bad_request(f"error decoding patch: {exc}") from exc
        with self.store.lock:
            old = self.store.get(rtype.store_key, namespace, name)
            if old is None:
                if content_type == patches.APPLY_PATCH:
                    return self.create(rtype, namespace, body, dry_run=dry_run, strict=strict)
                raise not_found(rtype.plural, name, rtype.group)
            current = self.present(rtype, old)
            if content_type == patches.JSON_PATCH:
                new = patches.json_patch(current, body)
            elif content_type == patches.MERGE_PATCH:
                new = patches.merge_patch(current, body)
            else:
                if not isinstance(body, dict):
                    raise bad_request("patch body must be a JSON object")
                new = patches.strategic_merge_patch(current, body, rtype.api_version, rtype.kind)
            if not isinstance(new, dict):
                raise bad_request("the patch did not produce an object")
            wanted = body.get("metadata", {}).get("resourceVersion") if isinstance(body, dict) else None
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise conflict(rtype.plural, name, rtype.group)
            new = self._check_body(rtype, new, namespace)
            if new["metadata"].get("name") != name:
                shown = new["metadata"].get("name")
                raise bad_request(f"the name of the object ({shown}) does not match the name on the URL ({name})")
            causes = check_schema(new, rtype, strict=strict)
            return self._store_update(rtype, old, self._to_storage(rtype, new), subresource, causes, dry_run)

    def _store_update(
        self, rtype: ResourceType, old: JSON, new: JSON, subresource: str, causes: list[Any], dry_run: bool
    ) -> JSON:
        rkind = kind_for(rtype.store_key)
        meta, old_meta = new["metadata"], old["metadata"]
        for fixed in (
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
        ):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        meta["namespace"] = old_meta.get("namespace")
        if not rtype.namespaced:
            meta.pop("namespace", None)
        if rkind.status_subresource:
            if subresource == "status":
                # A status write changes status (and metadata); the spec stays as it was.
                new = {**new, **{k: v for k, v in old.items() if k not in ("status", "metadata")}}
            elif "status" in old:
                new["status"] = old["status"]
            else:
                new.pop("status", None)
        causes = list(causes) + metadata_causes(new, rtype) + rkind.validate(self, new, old)
        if causes:
            raise invalid(rtype.kind, meta["name"], causes, rtype.group)
        if rkind.generation and _spec_of(new) != _spec_of(old):
            meta["generation"] = old_meta.get("generation", 1) + 1
        if _same(old, new):
            return self.present(rtype, old)  # a no-op write does not bump resourceVersion
        if dry_run:
            return self.present(rtype, new)
        if meta.get("deletionTimestamp") and not meta.get("finalizers") and not _graceful(rtype, new):
            return self.present(rtype, self._remove(rtype.store_key, new, "Background"))
        return self.present(rtype, self.store.put(rtype.store_key, new, created=False))

    # -- delete -----------------------------------------------------------------------------------

    def delete(self, rtype: ResourceType, namespace: str, name: str, options: DeleteOptions) -> JSON:
        with self.store.lock:
            obj = self.store.get(rtype.store_key, namespace, name)
            if obj is None:
                raise not_found(rtype.plural, name, rtype.group)
            meta = obj["metadata"]
            if options.uid and options.uid != meta["uid"]:
                raise conflict(rtype.plural, name, rtype.group)
            if options.resource_version and options.resource_version != meta["resourceVersion"]:
                raise conflict(rtype.plural, name, rtype.group)
            if options.dry_run:
                return self.present(rtype, obj)
            policy = options.propagation or ("Orphan" if rtype.store_key == "jobs" else "Background")
            if rtype.store_key == "namespaces":
                return self._terminate_namespace(obj)
            if rtype.store_key == "pods":
                grace = self._grace_period(obj, options.grace_period_seconds)
                if grace > 0:
                    return self._begin_pod_termination(obj, grace)
            if meta.get("finalizers") or policy == "Foreground":
                return self._mark_deleting(rtype, obj, policy)
            removed = self._remove(rtype.store_key, obj, policy)
            if rtype.store_key == "pods":
                return removed
            return {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "group": rtype.group, "kind": rtype.plural, "uid": meta["uid"]},
            }

    def delete_collection(
        self,
        rtype: ResourceType,
        namespace: str | None,
        options: DeleteOptions,
        *,
        label_selector: str = "",
        field_selector: str = "",
    ) -> JSON:
        items, meta = self.select(rtype, namespace, label_selector=label_selector, field_selector=field_selector)
        for item in items:
            try:
                self.delete(rtype, item["metadata"].get("namespace", ""), item["metadata"]["name"], options)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return {"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": meta, "items": items}

    @staticmethod
    def _grace_period(pod: JSON, requested: int | None) -> int:
        if not pod["spec"].get("nodeName") or pod.get("status", {}).get("phase") in TERMINAL_PHASES:
            return 0  # nothing runs, so nothing needs time to stop
        if requested is not None:
            return max(requested, 0)
        return int(pod["spec"].get("terminationGracePeriodSeconds", 30))

    def _begin_pod_termination(self, pod: JSON, grace: int) -> JSON:
        meta = pod["metadata"]
        # A second delete may only shorten the grace period.
        if meta.get("deletionTimestamp") and grace >= meta.get("deletionGracePeriodSeconds", grace):
            return pod
        deadline = self.clock.now() + timedelta(seconds=grace)
        new = {
            **pod,
            "metadata": {**meta, "deletionTimestamp": rfc3339(deadline), "deletionGracePeriodSeconds": grace},
        }
        return self.store.put("pods", new, created=False)

    def _mark_deleting(self, rtype: ResourceType, obj: JSON, policy: str) -> JSON:
        meta = dict(obj["metadata"])
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = self.now_text()
            meta["deletionGracePeriodSeconds"] = 0
        if policy == "Foreground":
            meta["finalizers"] = [*meta.get("finalizers", []), "foregroundDeletion"]
            meta["finalizers"] = list(dict.fromkeys(meta["finalizers"]))
        stored = self.store.put(rtype.store_key, {**obj, "metadata": meta}, created=False)
        if policy == "Foreground":
            self._collect_dependents(meta["uid"], "Background")
            self.finish_foreground(rtype.store_key, stored)
        return self.present(rtype, self.store.get(rtype.store_key, meta.get("namespace", ""), meta["name"]) or stored)

    def finish_foreground(self, store_key: str, obj: JSON) -> None:
        """Drop the foregroundDeletion finalizer once no dependents are left (the garbage collector's job)."""
        meta = obj["metadata"]
        if "foregroundDeletion" not in meta.get("finalizers", []) or self.store.dependents(meta["uid"]):
            return
        finalizers = [f for f in meta["finalizers"] if f != "foregroundDeletion"]
        if finalizers:
            self.store.put(store_key, {**obj, "metadata": {**meta, "finalizers": finalizers}}, created=False)
        else:
            self._remove(store_key, obj, "Background")

    def _remove(self, store_key: str, obj: JSON, policy: str) -> JSON:
        meta = obj["metadata"]
        removed = self.store.remove(store_key, meta.get("namespace", ""), meta["name"]) or obj
        self._collect_dependents(meta["uid"], policy)
        return removed

    def _collect_dependents(self, owner_uid: str, policy: str) -> None:
        for store_key, namespace, name in self.store.dependents(owner_uid):
            dependent = self.store.get(store_key, namespace, name)
            if dependent is None:
                continue
            if policy == "Orphan":
                meta = dependent["metadata"]
                refs = [r for r in meta.get("ownerReferences", []) if r["uid"] != owner_uid]
                new_meta = (
                    {**meta, "ownerReferences": refs}
                    if refs
                    else {k: v for k, v in meta.items() if k != "ownerReferences"}
                )
                self.store.put(store_key, {**dependent, "metadata": new_meta}, created=False)
                continue
            if dependent["metadata"].get("deletionTimestamp") and store_key != "pods":
                continue
            if store_key == "pods":
                grace = self._grace_period(dependent, None)
                if grace > 0:
                    if not dependent["metadata"].get("deletionTimestamp"):
                        self._begin_pod_termination(dependent, grace)
                    continue
            self._remove(store_key, dependent, "Background")

    def remove_terminated_pod(self, pod: JSON) -> None:
        """The kubelet confirms a pod has stopped: the object goes away (force delete)."""
        with self.store.lock:
            current = self.store.get("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            if current is not None and current["metadata"]["uid"] == pod["metadata"]["uid"]:
                self._remove("pods", current, "Background")

    # -- namespaces -------------------------------------------------------------------------------

    def _terminate_namespace(self, ns: JSON) -> JSON:
        meta = ns["metadata"]
        if ns.get("status", {}).get("phase") != "Terminating":
            ns = self.store.put(
                "namespaces",
                {
                    **ns,
                    "metadata": {**meta, "deletionTimestamp": self.now_text()},
                    "status": {"phase": "Terminating"},
                },
                created=False,
            )
        self.finish_namespace(ns)
        return self.store.get("namespaces", "", meta["name"]) or ns

    def finish_namespace(self, ns: JSON) -> None:
        """Delete what the namespace holds; remove it once empty (the namespace controller's job)."""
        name = ns["metadata"]["name"]
        with self.store.lock:
            empty = True
            for store_key in sorted({r.store_key for r in _NAMESPACED}):
                for obj in self.store.all(store_key, name):
                    empty = False
                    if store_key == "pods":
                        grace = self._grace_period(obj, None)
                        if grace > 0:
                            if not obj["metadata"].get("deletionTimestamp"):
                                self._begin_pod_termination(obj, grace)
                            continue
                    self._remove(store_key, obj, "Background")
            if empty or not any(self.store.all(r.store_key, name) for r in _NAMESPACED):
                current = self.store.get("namespaces", "", name)
                if current is not None:
                    self.store.remove("namespaces", "", name)

    # -- writes by the simulated components ---------------------------------------------------------

    def system_create(self, store_key: str, obj: JSON) -> JSON:
        """Create an object as a controller would (after API defaulting, no user validation)."""
        with self.store.lock:
            meta = obj["metadata"]
            meta.setdefault("uid", self.new_uid())
            meta.setdefault("creationTimestamp", self.now_text())
            if kind_for(store_key).generation:
                meta.setdefault("generation", 1)
            return self.store.put(store_key, obj, created=True)

    def system_update(self, store_key: str, obj: JSON) -> JSON:
        """Store a controller's new version of an object (a status write or a label change)."""
        with self.store.lock:
            meta = obj["metadata"]
            current = self.store.get(store_key, meta.get("namespace", ""), meta["name"])
            if current is None or current["metadata"]["uid"] != meta["uid"]:
                return obj  # deleted meanwhile; the controller's write has nothing to land on
            if _same(current, obj):
                return current
            return self.store.put(store_key, obj, created=False)

    def system_delete(self, rtype: ResourceType, namespace: str, name: str, propagation: str = "Background") -> None:
        try:
            self.delete(rtype, namespace, name, DeleteOptions(propagation=propagation))
        except ApiError as exc:
            if exc.code != 404:
                raise

    def emit_event(self, event: JSON) -> None:
        """Record an Event; a repeat of one about the same object (same reason, message and source)
        bumps its count and lastTimestamp, as client-go's event recorder aggregates them."""
        ref = event.get("involvedObject", {})
        key = (
            ref.get("uid", ""),
            event.get("reason", ""),
            event.get("message", ""),
            event.get("reportingComponent", ""),
        )
        with self.store.lock:
            namespace = event["metadata"].get("namespace") or "default"
            if self.store.get("namespaces", "", namespace) is None:
                return
            seen = self._event_names.get(key)
            existing = self.store.get("events", *seen) if seen else None
            if existing is not None:
                self.store.put(
                    "events",
                    {
                        **existing,
                        "metadata": dict(existing["metadata"]),
                        "count": existing.get("count", 1) + 1,
                        "lastTimestamp": event.get("lastTimestamp") or self.now_text(),
                    },
                    created=False,
                )
                return
            # Named `<object>.<nanoseconds>` like client-go's recorder, strictly increasing so that events
            # recorded in the same instant still list in the order they happened.
            self._event_clock = max(int(self.clock.now().timestamp() * 1e9), self._event_clock + 1)
            name = f"{ref.get('name', 'unknown')}.{self._event_clock:x}"
            event = {**event, "metadata": {**event["metadata"], "namespace": namespace, "name": name}}
            stored = self.system_create("events", event)
            self._event_names[key] = (namespace, stored["metadata"]["name"])
            if len(self._event_names) > MAX_EVENTS:
                self._expire_events()

    def _expire_events(self) -> None:
        """Keep the newest events only, as the real event TTL does."""
        all_events = sorted(self.store.all("events"), key=lambda e: int(e["metadata"]["resourceVersion"]))
        for event in all_events[: len(all_events) // 2]:
            self.store.remove("events", event["metadata"]["namespace"], event["metadata"]["name"])
        live = {(e["metadata"]["namespace"], e["metadata"]["name"]) for e in all_events[len(all_events) // 2 :]}
        self._event_names = {k: v for k, v in self._event_names.items() if v in live}

    # -- bootstrap --------------------------------------------------------------------------------

    def bootstrap(self) -> None:
        for name in SYSTEM_NAMESPACES:
            self.create(NAMESPACES, "", {"metadata": {"name": name}})
        # The API server's own Service, which every cluster has.
        kubernetes = {
            "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]},
        }
        self.create(SERVICES, "default", kubernetes)
        for name, value in SYSTEM_PRIORITY_CLASSES.items():
            self.create(
                PRIORITY_CLASSES,
                "",
                {
                    "metadata": {"name": name},
                    "value": value,
                    "description": "Used for system critical pods that must not be moved from their current node.",
                },
            )


_NAMESPACED = [r for r in RESOURCES if r.namespaced]


def _spec_of(obj: JSON) -> JSON:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _same(a: JSON, b: JSON) -> bool:
    strip = ("resourceVersion", "managedFields")
    return {**a, "metadata": {k: v for k, v in a["metadata"].items() if k not in strip}} == {
        **b,
        "metadata": {k: v for k, v in b["metadata"].items() if k not in strip},
    }


def _graceful(rtype: ResourceType, obj: JSON) -> bool:
    """Pods with a deletionTimestamp wait for the kubelet, not for finalizers."""
    return (
        rtype.store_key == "pods"
        and bool(obj["spec"].get("nodeName"))
        and obj.get("status", {}).get("phase") not in TERMINAL_PHASES
    )
