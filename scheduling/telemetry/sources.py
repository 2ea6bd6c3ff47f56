"""Where GPU activity is read from, one interface, chosen by settings (``TELEMETRY_SOURCE``):

- ``prometheus``: a Prometheus server's HTTP API (``PROMETHEUS_URL``), one instant query for the dcgm-exporter
  series. Prometheus leaves out a series whose target's last scrape failed (staleness markers) or whose last
  sample is older than its lookback (5 min), so what it does not know reads as no data, not as an old value.
- ``scrape``: dcgm-exporter (or pynvml node agent) endpoints scraped directly (``DCGM_SCRAPE_URLS``), for
  small clusters without Prometheus; readings carry the time of the scrape.
- empty: no GPU telemetry (nothing is ever reclaimed for GPU idleness).

A source that cannot be read raises ``TelemetryUnavailable``: callers treat that as "no data", never as
"idle". Every call is bounded by ``TELEMETRY_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ClassVar, Protocol

from django.conf import settings

from scheduling.telemetry.dcgm import METRICS, DeviceReading, Sample, device_readings, parse_exposition


class TelemetryUnavailable(Exception):
    """The source could not be read; what it would have said is unknown."""


class GpuTelemetry(Protocol):
    @property
    def kind(self) -> str:
        """What the figures came from, as samples record it: "prometheus" or "scrape"."""
        ...

    def readings(self) -> list[DeviceReading]:
        """The devices pods hold now, with what each does."""
        ...


def _get(url: str, timeout: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - operator-configured URL
            body: bytes = response.read()
            return body
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise TelemetryUnavailable(f"{url}: {exc}") from exc


@dataclass(frozen=True)
class DirectScrape:
    """dcgm-exporter's ``/metrics`` on each node (or the pynvml agent's), read in turn. One endpoint that
    does not answer fails the whole read: a partial view would make the missing node's pods look idle."""

    urls: Sequence[str]
    timeout: float = 5.0
    kind: ClassVar[str] = "scrape"

    def readings(self) -> list[DeviceReading]:
        found: list[DeviceReading] = []
        for url in self.urls:
            text = _get(url, self.timeout).decode("utf-8", errors="replace")
            try:
                samples = parse_exposition(text)
            except ValueError as exc:
                raise TelemetryUnavailable(f"{url}: not the Prometheus text format ({exc})") from exc
            found += device_readings(samples, datetime.now(UTC))
        return found


@dataclass(frozen=True)
class PrometheusQuery:
    """An instant query for the latest value of every dcgm-exporter series the portal reads, at the time
    Prometheus evaluated it (the readings' ``observed_at``)."""

    url: str
    timeout: float = 5.0
    kind: ClassVar[str] = "prometheus"

    def readings(self) -> list[DeviceReading]:
        query = '{__name__=~"' + "|".join(METRICS) + '"}'
        endpoint = f"{self.url.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        try:
            return readings_from_query(_get(endpoint, self.timeout))
        except ValueError as exc:
            raise TelemetryUnavailable(f"{self.url}: {exc}") from exc


def readings_from_query(body: bytes) -> list[DeviceReading]:
    """An instant query's JSON answer (``resultType`` vector) as readings; ValueError if it is not one."""
    answer = json.loads(body)
    if answer.get("status") != "success" or answer.get("data", {}).get("resultType") != "vector":
        raise ValueError(answer.get("error") or "not an instant vector")
    by_time: dict[float, list[Sample]] = {}
    for series in answer["data"]["result"]:
        labels = dict(series["metric"])
        name = labels.pop("__name__", "")
        at, value = series["value"]
        by_time.setdefault(float(at), []).append((name, labels, float(value)))
    found: list[DeviceReading] = []
    for at, samples in by_time.items():
        found += device_readings(samples, datetime.fromtimestamp(at, UTC))
    return found


def configured_source() -> GpuTelemetry | None:
    """The source the settings name, or None when GPU telemetry is off."""
    timeout = settings.TELEMETRY_TIMEOUT_SECONDS
    if settings.TELEMETRY_SOURCE == "prometheus":
        return PrometheusQuery(settings.PROMETHEUS_URL, timeout=timeout)
    if settings.TELEMETRY_SOURCE == "scrape":
        return DirectScrape(tuple(settings.DCGM_SCRAPE_URLS), timeout=timeout)
    return None
