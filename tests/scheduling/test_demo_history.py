"""The demo's week of history: what a new demo's charts show."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from portal.demo import seed_demo_organisation
from portal.models import Team, User
from scheduling.demo import HISTORY, seed_demo_catalogue, seed_demo_history
from scheduling.models import TeamQuota
from tests.catalogue import install_offerings
from workspaces.models import Workspace


def test_a_new_demo_gets_a_week_of_finished_work_once(db: None) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    install_offerings()
    now = timezone.now()
    assert seed_demo_history(now) == 7 * len(HISTORY)
    assert seed_demo_history(now) == 0  # only on a demo without workspaces
    rows = Workspace.objects.all()
    assert all(w.finished_at is not None and w.finished_at <= now for w in rows)
    assert not rows.filter(state__in=Workspace.ACTIVE_STATES).exists()  # nothing for the worker to run
    assert TeamQuota.objects.get(team__slug="language", flavour="H100-80GB-HBM3").borrow_limit == 8

    client = Client()
    client.force_login(User.objects.get(username="lena"))
    vision = Team.objects.get(slug="vision")
    figures = client.get(f"/teams/{vision.pk}/quota/").context["figures"]
    h100 = next(f for f in figures if f["layout"]["title"]["text"].startswith("H100"))
    peak = {trace["name"]: max(trace["y"]) for trace in h100["data"]}
    assert peak["used"] == 2  # alice's 2-GPU notebooks
    assert peak["lent"] == 4  # language borrowed vision's idle H100s at night


@pytest.mark.parametrize("hour", [0, 3, 12, 23])
def test_the_history_has_ended_whatever_the_hour_it_is_seeded(db: None, hour: int) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    install_offerings()
    now = datetime(2026, 3, 10, hour, 30, tzinfo=UTC)
    assert seed_demo_history(now) == 7 * len(HISTORY)
    last = Workspace.objects.order_by("-finished_at").values_list("finished_at", flat=True).first()
    assert last is not None and now - timedelta(days=1) < last <= now  # the week reaches the last day
