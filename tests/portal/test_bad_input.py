"""Bad input is refused with 400/404/409 in the API's error format, never answered with a server error.

NUL characters only crash PostgreSQL (its text fields cannot hold them), so these tests assert the 400 on any
database, and pass on PostgreSQL too (DATABASE_URL set, as CI does)."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from django.core.cache import cache
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from portal.api.pagination import MAX_LIMIT
from tests import catalogue
from tests.conftest import Org, api_client_for
from tests.factories import make_workspace
from workspaces.models import GpuOffering, Workspace

HUGE = 10**30  # beyond every integer column (bigint is 2**63 - 1)


def _workspace_on(org: Org, offering: GpuOffering) -> Workspace:
    return make_workspace(org.alpha, org.member, offering, name="ws")


def _assert_error(response: object, status: int, code: str, *words: str) -> None:
    assert response.status_code == status, response.content  # type: ignore[attr-defined]
    body = response.json()  # type: ignore[attr-defined]
    assert set(body) == {"detail", "code", "errors"}
    assert body["code"] == code
    for word in words:
        assert word in body["detail"]


@pytest.mark.parametrize("bracket", ["[", '{"a":'])
def test_deeply_nested_json_is_refused_with_400(org: Org, bracket: str) -> None:
    closing = "]" if bracket == "[" else "}"
    body = bracket * 100_000 + "1" + closing * 100_000
    response = api_client_for(org.member).post("/api/v1/workspaces/", body, content_type="application/json")
    _assert_error(response, 400, "parse_error", "nested deeper than")


def test_json_nested_deeper_than_the_limit_is_refused_before_validation(org: Org) -> None:
    # 900 levels still parse, but DRF's JSONField and the JSON encoder recurse over them again.
    selector: object = "gpu"
    for _ in range(900):
        selector = {"a": selector}
    body = {"slug": "deep", "display_name": "Deep", "kind": "cpu", "node_selector": selector}
    response = api_client_for(org.operator).post("/api/v1/offerings/", body, format="json")
    _assert_error(response, 400, "parse_error", "nested deeper than")
    assert not GpuOffering.objects.filter(slug="deep").exists()


def test_ordinary_json_still_parses(org: Org) -> None:
    response = api_client_for(org.member).post("/api/v1/workspaces/", {"kind": "notebook"}, format="json")
    assert response.status_code == 400
    assert "team" in response.json()["errors"]


def test_nul_in_a_json_body_is_refused_with_400(org: Org) -> None:
    catalogue.install_offerings()
    response = api_client_for(org.operator).post(
        "/api/v1/offerings/",
        {"slug": "x", "display_name": "x", "kind": "cpu", "node_selector": {"a\x00": "b"}},
        format="json",
    )
    _assert_error(response, 400, "parse_error", "NUL")


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/workspaces/?team=al%00pha",
        "/api/v1/workspaces/?state=queued%00",
        "/api/v1/workspaces/?te%00am=alpha",
        "/api/v1/offerings/h100%00/",
        "/api/v1/images/scipy%00/",
        "/api/v1/teams/1/members/ali%00ce/",
    ],
)
def test_nul_in_query_parameters_or_path_is_refused_with_400(org: Org, path: str) -> None:
    catalogue.install_images()
    response = api_client_for(org.operator).get(path)
    _assert_error(response, 400, "invalid", "NUL")


def test_nul_in_a_page_url_is_refused_with_400(org: Org) -> None:
    client = api_client_for(None)
    client.force_login(org.member)
    response = client.get("/workspaces/?team=al%00pha")
    assert response.status_code == 400
    assert b"NUL" in response.content


@pytest.mark.parametrize(("query", "shown"), [(f"limit={HUGE}", 1), (f"limit={HUGE}&offset=1", 0)])
def test_a_huge_limit_is_clamped(org: Org, query: str, shown: int) -> None:
    offerings = catalogue.install_offerings()
    _workspace_on(org, offerings["h100-80gb-hbm3"])
    response = api_client_for(org.member).get(f"/api/v1/workspaces/?{query}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 1
    assert len(body["results"]) == shown


def test_the_limit_is_capped(org: Org) -> None:
    catalogue.install_offerings()
    response = api_client_for(org.member).get(f"/api/v1/offerings/?limit={MAX_LIMIT * 10}&offset=1")
    assert response.status_code == 200
    assert parse_qs(urlsplit(response.json()["previous"]).query)["limit"] == [str(MAX_LIMIT)]


def test_a_huge_offset_answers_an_empty_page(org: Org) -> None:
    # Guard: DRF answers an offset past the count without a query; the clamp must keep that.
    catalogue.install_offerings()
    response = api_client_for(org.member).get(f"/api/v1/offerings/?offset={HUGE}&limit={HUGE}")
    assert response.status_code == 200, response.content
    assert response.json()["results"] == []


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/workspaces/{HUGE}/",
        f"/api/v1/workspaces/{HUGE}/logs/",
        f"/api/v1/teams/{HUGE}/",
        f"/api/v1/teams/{HUGE}/policy/",
        f"/api/v1/teams/{HUGE}/member-caps/",
        f"/api/v1/departments/{HUGE}/caps/",
        f"/api/v1/workspaces/{-HUGE}/",
    ],
)
def test_huge_ids_in_paths_answer_404(org: Org, path: str) -> None:
    # Guard: Django 5 already answers integer lookups beyond the column's range with "no such row".
    response = api_client_for(org.operator).get(path)
    _assert_error(response, 404, "not_found")


def test_deleting_an_offering_that_workspaces_use_answers_409_with_the_reason(org: Org) -> None:
    offerings = catalogue.install_offerings()
    offering = offerings["h100-80gb-hbm3"]
    _workspace_on(org, offering)
    response = api_client_for(org.operator).delete(f"/api/v1/offerings/{offering.slug}/")
    _assert_error(response, 409, "protected", "workspace")
    assert GpuOffering.objects.filter(pk=offering.pk).exists()


def test_an_unused_offering_can_still_be_deleted(org: Org) -> None:
    offering = catalogue.install_offerings()["h100-80gb-hbm3"]
    response = api_client_for(org.operator).delete(f"/api/v1/offerings/{offering.slug}/")
    assert response.status_code == 204
    assert not GpuOffering.objects.filter(pk=offering.pk).exists()


def test_user_and_anon_throttles_are_active() -> None:
    active: list[object] = list(api_settings.DEFAULT_THROTTLE_CLASSES)
    assert UserRateThrottle in active
    assert AnonRateThrottle in active
    assert {"user", "anon"} <= set(api_settings.DEFAULT_THROTTLE_RATES)


def test_a_user_over_the_rate_gets_429(org: Org, monkeypatch: pytest.MonkeyPatch) -> None:
    # The suite runs with a rate no test reaches; lower it here to see the throttle answer.
    monkeypatch.setitem(SimpleRateThrottle.THROTTLE_RATES, "user", "3/minute")
    cache.delete(f"throttle_user_{org.member.pk}")
    client = api_client_for(org.member)
    statuses = [client.get("/api/v1/me/").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    _assert_error(client.get("/api/v1/me/"), 429, "throttled")
    cache.delete(f"throttle_user_{org.member.pk}")
