"""Deletion with the API server's conventions: preconditions, graceful pod termination, finalizers,
propagation policies (garbage collection through ownerReferences) and namespace termination."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from scheduling.simcluster.api_reads import ClusterReads
from scheduling.simcluster.clock import rfc3339
from scheduling.simcluster.errors import ApiError, bad_request, conflict, not_found
from scheduling.simcluster.resources import RESOURCES, ResourceType

JSON = dict[str, Any]

TERMINAL_PHASES = ("Succeeded", "Failed")


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


class ClusterDeletion(ClusterReads):
    """The delete verbs and what they set going: pod termination, garbage collection, namespace cleanup."""

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
            # Registries with ReturnDeletedObject answer with the object (the DRA ones do), others with a Status.
            if rtype.store_key == "pods" or rtype.group == "resource.k8s.io":
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


_NAMESPACED = [r for r in RESOURCES if r.namespaced]
