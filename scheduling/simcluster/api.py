"""The API server's semantics, independent of HTTP: create, get, list, update, patch, delete and watch
with the real conventions (uids, generateName, resourceVersion and optimistic concurrency, status
subresources, finalizers, graceful pod deletion, garbage collection through ownerReferences, namespace
termination), plus the small interface the controllers write through.

Reads live in :mod:`~scheduling.simcluster.api_reads`, deletion in :mod:`~scheduling.simcluster.api_deletion`;
:class:`Cluster` adds creation, updates and patches, the controllers' writes, Events and bootstrap."""

from __future__ import annotations

import json
from typing import Any

import yaml

from scheduling.simcluster import events as event_shapes
from scheduling.simcluster import patch as patches
from scheduling.simcluster.api_deletion import TERMINAL_PHASES, ClusterDeletion, DeleteOptions
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
from scheduling.simcluster.resources import NAMESPACES, PRIORITY_CLASSES, SERVICES, ResourceType
from scheduling.simcluster.validation import check_schema, metadata_causes

JSON = dict[str, Any]

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
MAX_EVENTS = 50_000  # beyond this the oldest half goes, standing in for the real one-hour event TTL


class Cluster(ClusterDeletion):
    """The simulated API server: reads and deletion from its bases, every other write here."""

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
