"""Run in a child process with a deployment's environment: load the settings, run `check --deploy`, then send
the health probes through Django as the kubelet or the Compose healthcheck would, and print a JSON report.

    python -m tests.deploy.settings_probe '<healthcheck python source or empty>' '<Host header of the probe>'
"""

from __future__ import annotations

import io
import json
import os
import re
import sys
import urllib.error
import urllib.request
from typing import Any


def main(healthcheck: str, probe_host: str) -> dict[str, Any]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client

    err = io.StringIO()
    call_command("check", deploy=True, stdout=io.StringIO(), stderr=err)  # raises on any error
    client = Client()
    report: dict[str, Any] = {
        "warnings": sorted(set(re.findall(r"\((security\.W\d+)\)", err.getvalue()))),
        "kube_in_cluster": settings.KUBE_IN_CLUSTER,
        "kubeconfig": settings.KUBECONFIG,
        "static_root": str(settings.STATIC_ROOT),
        "healthz_as_probe": client.get("/healthz", HTTP_HOST=probe_host).status_code,
        "healthz_unknown_host": client.get("/healthz", HTTP_HOST="10.99.99.99:8000").status_code,
    }
    if healthcheck:
        # The Compose healthcheck's own code, with urlopen answered by Django instead of a socket.
        def urlopen(request: urllib.request.Request, timeout: float = 0) -> Any:
            host = request.get_header("Host") or "127.0.0.1:8000"
            response = client.get(request.selector, HTTP_HOST=host)
            if response.status_code >= 400:
                raise urllib.error.HTTPError(request.full_url, response.status_code, "refused", {}, None)  # type: ignore[arg-type]
            return response

        urllib.request.urlopen = urlopen  # type: ignore[assignment]
        try:
            exec(healthcheck, {})  # noqa: S102 - the checked-in compose file's healthcheck
            report["healthcheck"] = "ok"
        except urllib.error.HTTPError as exc:
            report["healthcheck"] = exc.code
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
