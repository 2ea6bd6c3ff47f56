"""The list's rows are rendered once for what they show and then taken from the cache
(``workspaces/row_fragments.py``): a changed list renders again only the rows that changed, viewers who
share rows still get only their own actions and their own CSRF token, and the list does without the cache
when it is down."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.cache.backends.redis import RedisCache
from django.test import Client
from django.test.signals import template_rendered

from portal.models import User
from tests import factories
from tests.catalogue import install_offerings
from tests.conftest import Org
from workspaces import row_fragments
from workspaces.models import GpuOffering, Workspace

ROWS = "/workspaces/?rows=1&show=50"


def _offering() -> GpuOffering:
    return next(iter(install_offerings().values()))


def _browser(user: User, *, enforce_csrf: bool = False) -> Client:
    client = Client(enforce_csrf_checks=enforce_csrf)
    client.force_login(user)
    return client


@contextmanager
def _rows_rendered() -> Iterator[list[Any]]:
    rendered: list[Any] = []

    def record(sender: Any, template: Any, context: Any, **kwargs: Any) -> None:
        if template.name == row_fragments.ROW_TEMPLATE:
            rendered.append(context["workspace"].pk)

    template_rendered.connect(record)
    try:
        yield rendered
    finally:
        template_rendered.disconnect(record)


def _row_ids(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-id="(\d+)"', html)]


def test_a_changed_list_renders_again_only_the_row_that_changed(db: None, org: Org) -> None:
    offering = _offering()
    workspaces = [factories.make_workspace(org.alpha, org.member, offering) for _ in range(5)]
    browser = _browser(org.member)
    with _rows_rendered() as first:
        page = browser.get("/workspaces/")
    assert sorted(first) == sorted(w.pk for w in workspaces)
    changed = workspaces[2]
    Workspace.objects.filter(pk=changed.pk).update(reason="Waiting for an A100 slice.")
    with _rows_rendered() as again:
        rows = browser.get(ROWS).content.decode()
    assert again == [changed.pk]
    assert "Waiting for an A100 slice." in rows
    assert _row_ids(rows) == _row_ids(page.content.decode()) and len(_row_ids(rows)) == 5


def test_viewers_share_rows_yet_each_is_offered_only_their_actions_with_their_own_token(db: None, org: Org) -> None:
    teammate = factories.make_user("ada")
    factories.add_member(org.alpha, teammate)
    workspace = factories.make_workspace(org.alpha, org.member, _offering())  # queued: its owner may stop it
    stop = f"/workspaces/{workspace.pk}/stop/"

    seen = _browser(teammate).get(ROWS).content.decode()
    assert _row_ids(seen) == [workspace.pk] and 'data-verb="stop"' not in seen and "csrfmiddlewaretoken" not in seen

    with _rows_rendered() as rendered:
        lead = _browser(org.lead).get(ROWS).content.decode()
    assert rendered == [workspace.pk] and f'action="{stop}"' in lead  # the teammate's row offers nothing
    owner = _browser(org.member, enforce_csrf=True)
    with _rows_rendered() as rendered:
        mine = owner.get(ROWS).content.decode()
    assert rendered == [] and f'action="{stop}"' in mine  # the owner is offered what the lead is: shared

    (token,) = set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', mine))
    assert owner.post(stop, {"csrfmiddlewaretoken": token}).status_code == 302
    assert Workspace.objects.get(pk=workspace.pk).state != Workspace.State.QUEUED


def test_the_list_does_without_the_cache_when_it_is_down(db: None, org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = factories.make_workspace(org.alpha, org.member, _offering())
    monkeypatch.setattr(row_fragments, "shared_cache", RedisCache("redis://127.0.0.1:1/0", {}))  # nothing listens
    response = _browser(org.member).get(ROWS)
    assert response.status_code == 200 and _row_ids(response.content.decode()) == [workspace.pk]
