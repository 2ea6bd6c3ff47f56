"""The demo's broker folder, with messages that appear whole.

Kombu's filesystem transport writes a message into its final name and only then fills it, so a worker
polling the folder can take the file while it is still empty and die on the empty JSON (kombu issue
#1551). Here a message is written under a name no queue matches and renamed into place when complete
(``os.replace`` is atomic on one file system). Registered as the ``filesystem://`` transport in
``portal/celery.py``.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

# celery-types stubs only part of kombu.
from kombu.exceptions import ChannelError  # type: ignore[attr-defined]
from kombu.transport import filesystem  # type: ignore[attr-defined]
from kombu.utils import json as kombu_json


class Channel(filesystem.Channel):  # type: ignore[misc]
    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{uuid.uuid4()}.partial")
        try:
            with open(partial, "wb") as handle:
                handle.write(kombu_json.dumps(payload).encode())  # type: ignore[call-arg]
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):  # type: ignore[misc]
    Channel = Channel
