"""Alice's notebook, end to end in the browser, on the full stack (real worker, Redis, PostgreSQL, simcluster)."""

from __future__ import annotations

import time

import pytest
from kubernetes import client
from playwright.sync_api import Page, expect

from portal.demo import PEOPLE, seed_demo_organisation
from scheduling.demo import seed_demo_catalogue
from scheduling.kube.keys import WORKSPACE_ID
from scheduling.simcluster.testing import SimCluster
from tests.browser_fixtures import log_in
from tests.catalogue import install_offerings
from workspaces.models import Workspace

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
PASSWORD = {p.username: p.password for p in PEOPLE}


def test_alice_requests_opens_stops_resumes_and_deletes_a_mig_notebook(
    page: Page, live_server, stack: SimCluster
) -> None:
    seed_demo_organisation()
    seed_demo_catalogue()
    install_offerings()
    log_in(page, live_server.url, "alice", PASSWORD["alice"])
    page.click("[data-nav=workspaces]")
    page.click("text=New workspace")
    page.fill("#id_name", "vision-nb")
    page.check("#offering-a100-sxm4-80gb-1g-10gb")
    page.fill("#id_image", "scipy-notebook")
    started = time.monotonic()
    page.click("#submit-request")
    expect(page.locator("#state")).to_have_text("running", timeout=10_000)
    assert time.monotonic() - started < 10
    expect(page.locator("#timeline")).to_contain_text("queued")
    expect(page.locator("#node")).to_have_text("gpu-a100-0")

    link = page.get_attribute("#open-notebook", "href") or ""
    assert link.startswith(f"{stack.plain_url}/api/v1/namespaces/team-vision/services/"), link  # no cert to accept
    with page.context.expect_page() as notebook_tab:
        page.click("#open-notebook")
    notebook = notebook_tab.value
    expect(notebook.locator("h1")).to_contain_text("Simulated Jupyter for team-vision/")
    notebook.close()

    core = client.CoreV1Api(stack.api_client())
    # Only this workspace's objects: the session's cluster outlives each test's database.
    own = f"{WORKSPACE_ID}={Workspace.objects.get(name='vision-nb').pk}"

    def pods() -> list[client.V1Pod]:
        found: list[client.V1Pod] = core.list_namespaced_pod("team-vision", label_selector=own).items
        return found

    def volumes() -> list[client.V1PersistentVolumeClaim]:
        claims = core.list_namespaced_persistent_volume_claim("team-vision", label_selector=own)
        found: list[client.V1PersistentVolumeClaim] = claims.items
        return found

    assert len(volumes()) == 1
    volume_uid = volumes()[0].metadata.uid

    page.click("#stop")
    expect(page.locator("#state")).to_have_text("stopped", timeout=10_000)
    assert pods() == []
    page.click("#resume")
    expect(page.locator("#state")).to_have_text("running", timeout=10_000)
    assert [v.metadata.uid for v in volumes()] == [volume_uid]  # the same home volume came back

    page.click("#delete")  # asks first
    page.click("#confirm-delete-button")
    expect(page.locator("#state")).to_have_text("deleted", timeout=10_000)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (pods() or volumes()):
        time.sleep(0.2)
    assert pods() == []
    assert volumes() == []
