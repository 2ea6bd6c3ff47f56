"""The telemetry benchmark's figures are consistent on a tiny cluster: both reads find every workspace."""

from __future__ import annotations

import pytest

from scheduling.benchmarks.telemetry import layout, main


def test_a_tiny_run_reports_a_row_per_workspace_for_both_sources(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--nodes", "4", "--workspaces", "10"])
    out = capsys.readouterr().out
    held = {ws for _, ws in layout(4, 10, seed=1).values()}
    assert f"held by {len(held)} workspaces" in out
    assert out.count(f"CPU per cycle, {len(held)} rows") == 2  # scrape and prometheus
