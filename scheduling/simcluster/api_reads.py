"""The API server's state and read side, independent of HTTP: the store and clock, uids and generated
names, how each group/version presents an object, and get, list (selectors, paging) and watch.

:class:`ClusterReads` is the base of :class:`~scheduling.simcluster.api.Cluster`; deletion is
:mod:`~scheduling.simcluster.api_deletion`, the other writes :mod:`~scheduling.simcluster.api`."""

from __future__ import annotations

import base64
import binascii
import json
import random
import threading
import uuid
from collections.abc import Callable
from typing import Any

from scheduling.simcluster import events as event_shapes
from scheduling.simcluster import selectors
from scheduling.simcluster.clock import SimClock, rfc3339
from scheduling.simcluster.errors import ApiError, bad_request, not_found
from scheduling.simcluster.resources import ResourceType
from scheduling.simcluster.store import Store, TooOld, Watcher

JSON = dict[str, Any]

_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's SimpleNameGenerator


class ClusterReads:
    """The cluster's state and its read verbs."""

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
