"""What people do with the portal open, for Locust (run by ``manage.py bench_pages``; see ``pages.py``).

Read by Locust alone (it patches the standard library with gevent): nothing here imports Django. The people,
with their sessions and tokens, come from the file named by ``GPUPORTAL_LOAD_PEOPLE``. Each simulated user is
one open tab or API client of one person; pages that refresh themselves are asked for at their own pace
(``static/js/workspaces.js`` and ``workspace_detail.js``: every 2 s). Like a browser, whose cache keeps an
answer with an ETag and revalidates it (``Cache-Control: no-cache``), each user sends back the last ETag it
got for an address in ``If-None-Match``; the API clients do as the API docs advise pollers. Request names
group the figures by endpoint, not by id.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from locust import FastHttpUser, task

PEOPLE: list[dict[str, Any]] = json.loads(open(os.environ["GPUPORTAL_LOAD_PEOPLE"]).read())  # noqa: SIM115
RNG = random.Random(int(os.environ.get("GPUPORTAL_LOAD_SEED", "1")))


def _person(*roles: str) -> dict[str, Any]:
    return RNG.choice([p for p in PEOPLE if p["role"] in roles])


class _Person(FastHttpUser):
    abstract = True
    roles: tuple[str, ...] = ("member",)
    api = False  # a token client (API) rather than a browser with a session
    pace = 2.0  # seconds from one request's start to the next

    def on_start(self) -> None:
        # Tabs open at random moments, so their refreshes are out of step with each other. Locust starts users
        # in batches (the spawn rate's worth at once), and plain constant pacing would keep each batch firing
        # together for the whole run: bursts no group of browsers makes.
        self.due = time.perf_counter() + RNG.uniform(0, self.pace)
        time.sleep(self.due - time.perf_counter())
        self.person = _person(*self.roles)
        self.etags: dict[str, str] = {}  # the browser's cache, or the API client's
        if self.api:
            self.headers = {"Authorization": f"Token {self.person['token']}", "Accept": "application/json"}
        else:
            self.headers = {"Cookie": f"sessionid={self.person['session']}"}

    def wait_time(self) -> float:
        """Constant pacing from the user's own phase (a late request delays the next, never doubles up)."""
        self.due = max(self.due + self.pace, time.perf_counter())
        return self.due - time.perf_counter()

    def get(self, path: str, name: str) -> None:
        # No redirect is followed: a page that sends its viewer to the login form has failed.
        headers = dict(self.headers)
        if path in self.etags:
            headers["If-None-Match"] = self.etags[path]
        with self.client.get(path, name=name, headers=headers, catch_response=True, allow_redirects=False) as response:
            if response.status_code not in (200, 304):
                response.failure(f"{response.status_code}")
            elif tag := response.headers.get("ETag"):
                self.etags[path] = tag

    def workspace(self) -> int:
        """The workspace whose page this tab has open (one of the person's, chosen at start)."""
        if not hasattr(self, "open_workspace"):
            self.open_workspace: int = RNG.choice(self.person["workspaces"])
        return self.open_workspace


class Researcher(_Person):
    """A member with their list of workspaces or one workspace open; now and then a fresh page load."""

    weight = 12
    pace = 2.0

    @task(6)
    def list_rows(self) -> None:
        self.get("/workspaces/?rows=1&show=50", "page: my workspaces, refresh")

    @task(6)
    def detail_refresh(self) -> None:
        self.get(f"/api/v1/workspaces/{self.workspace()}/", "api: a workspace, the page's refresh")

    @task(1)
    def list_page(self) -> None:
        self.get("/workspaces/", "page: my workspaces")

    @task(1)
    def detail_page(self) -> None:
        self.get(f"/workspaces/{self.workspace()}/", "page: a workspace")


class Lead(_Person):
    """A team lead on the team, quota and queue pages."""

    weight = 2
    roles = ("lead",)
    pace = 5.0

    @task
    def team(self) -> None:
        self.get(f"/teams/{self.person['team']}/", "page: team")

    @task
    def quota(self) -> None:
        self.get(f"/teams/{self.person['team']}/quota/", "page: team quota")

    @task
    def queue(self) -> None:
        self.get("/queue/", "page: queue")


class Finance(_Person):
    """Finance on last month's chargeback and a team's costs."""

    weight = 1
    roles = ("finance",)
    pace = 10.0

    @task
    def chargeback(self) -> None:
        self.get(f"/chargeback/?month={self.person['month']}", "page: chargeback, last month")

    @task
    def team_costs(self) -> None:
        self.get(f"/teams/{self.person['any_team']}/costs/", "page: team costs")


class ApiClient(_Person):
    """Scripts polling the API: their own workspaces, who they are, the queue."""

    weight = 3
    roles = ("member", "lead")
    api = True
    pace = 2.0

    @task(3)
    def mine(self) -> None:
        self.get("/api/v1/workspaces/?mine=1", "api: my workspaces")

    @task(2)
    def team_list(self) -> None:
        self.get("/api/v1/workspaces/", "api: workspaces of my teams")

    @task(1)
    def me(self) -> None:
        self.get("/api/v1/me/", "api: me")

    @task(1)
    def queue(self) -> None:
        self.get("/api/v1/queue/", "api: queue")


class OperatorClient(_Person):
    """An operator's dashboard polling every workspace (a page of 100)."""

    weight = 1
    roles = ("operator",)
    api = True
    pace = 2.0

    @task
    def everything(self) -> None:
        self.get("/api/v1/workspaces/", "api: all workspaces (operator)")


class Probe(_Person):
    """The bare view, measured beside everything else in the same run."""

    weight = 1
    pace = 0.5

    def on_start(self) -> None:
        super().on_start()
        self.headers = {}  # nobody signed in

    @task
    def healthz(self) -> None:
        self.get("/healthz", "bare view /healthz")
