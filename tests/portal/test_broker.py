"""The demo's broker folder: messages appear whole, under the queue's name, or not at all."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from kombu import Connection

from portal import celery as _celery  # noqa: F401 - registers the transport
from portal.broker import Transport


def test_filesystem_urls_use_the_atomic_transport(tmp_path: Path) -> None:
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "processed_folder": str(tmp_path)}
    with Connection("filesystem://", transport_options=options) as connection:
        assert isinstance(connection.transport, Transport)  # type: ignore[attr-defined]


def test_a_reader_polling_the_folder_never_takes_a_half_written_message(tmp_path: Path) -> None:
    options = {"data_folder_in": str(tmp_path), "data_folder_out": str(tmp_path), "processed_folder": str(tmp_path)}
    seen: list[bytes] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set() or any(tmp_path.glob("*.msg")):
            for path in sorted(tmp_path.glob("*.q.msg")):
                try:
                    seen.append(path.read_bytes())
                    path.unlink()
                except FileNotFoundError:
                    continue

    reader = threading.Thread(target=read)
    reader.start()
    with Connection("filesystem://", transport_options=options) as connection:
        channel = connection.channel()
        for n in range(300):
            channel._put("q", {"body": "x" * 5000, "n": n})  # type: ignore[attr-defined]
    done.set()
    reader.join(timeout=10)
    assert len(seen) == 300
    assert sorted(json.loads(raw)["n"] for raw in seen) == list(range(300))
    assert not list(tmp_path.glob("*.partial"))
