"""The events.k8s.io/v1 view of core v1 Events: both API groups read the same storage."""

from __future__ import annotations

from typing import Any

JSON = dict[str, Any]


def to_events_v1(event: JSON) -> JSON:
    """The events.k8s.io/v1 shape of a stored core Event."""
    out: JSON = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": event["metadata"],
        "eventTime": event.get("eventTime") or _micro(event.get("firstTimestamp")),
        "reportingController": event.get("reportingComponent") or event.get("source", {}).get("component", ""),
        "reportingInstance": event.get("reportingInstance", ""),
        "action": event.get("action", ""),
        "reason": event.get("reason", ""),
        "regarding": event.get("involvedObject", {}),
        "note": event.get("message", ""),
        "type": event.get("type", ""),
        "deprecatedSource": event.get("source", {}),
        "deprecatedFirstTimestamp": event.get("firstTimestamp"),
        "deprecatedLastTimestamp": event.get("lastTimestamp"),
        "deprecatedCount": event.get("count"),
    }
    if event.get("related"):
        out["related"] = event["related"]
    return {k: v for k, v in out.items() if v is not None}


def from_events_v1(event: JSON) -> JSON:
    """Store an events.k8s.io/v1 Event as the core Event it is underneath."""
    out: JSON = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": event.get("metadata", {}),
        "involvedObject": event.get("regarding", {}),
        "reason": event.get("reason", ""),
        "message": event.get("note", ""),
        "source": event.get("deprecatedSource", {}),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount"),
        "type": event.get("type", ""),
        "eventTime": event.get("eventTime"),
        "action": event.get("action", ""),
        "reportingComponent": event.get("reportingController", ""),
        "reportingInstance": event.get("reportingInstance", ""),
    }
    if event.get("related"):
        out["related"] = event["related"]
    return {k: v for k, v in out.items() if v is not None}


def _micro(value: str | None) -> str | None:
    return value.replace("Z", ".000000Z") if value else None
