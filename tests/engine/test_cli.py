import json

import numpy as np
import pytest

from scheduling.benchmarks import mig as mig_bench
from scheduling.benchmarks import placement as bench
from scheduling.engine.policies import make_policy
from scheduling.engine.shapes import PodShape
from scheduling.planning import trace, whatif
from tests.engine.helpers import write_nodes, write_pods

NODES = [
    (f"n{i}", 32_000, 131_072, g, m)
    for i, (g, m) in enumerate([(8, "G2"), (8, "G2"), (4, "T4"), (2, "T4"), (1, "P100")])
]
PODS = [
    (6000, 12_288, 1, 460, ""), (12_000, 24_576, 1, 1000, ""), (3000, 6000, 1, 810, ""), (8000, 8000, 0, 0, ""),
    (4000, 4096, 1, 230, ""), (16_000, 32_768, 2, 1000, ""), (2000, 2048, 1, 160, ""), (24_000, 65_536, 8, 1000, ""),
]  # fmt: skip


@pytest.fixture
def files(tmp_path):
    return write_nodes(tmp_path / "nodes.csv", NODES), write_pods(tmp_path / "pods.csv", PODS)


def test_bench_table_and_json(files, tmp_path, capsys):
    nodes, pods = files
    out = tmp_path / "r.json"
    argv = ["--nodes", str(nodes), "--pods", str(pods), "--policies", "bestfit,fgd,ours", "--seeds", "1-2"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "fgd" in text and "ours" in text and "seeds better" in text
    rows = json.loads(out.read_text())
    assert [r["policy"] for r in rows] == ["bestfit", "fgd", "ours"]
    for r in rows:
        assert len(r["seeds"]) == 2
        assert 0.0 <= r["mean_unallocated_pct"] <= 100.0
        assert set(r["curve_mean"]) <= {str(p) for p in range(75, 131)}
        assert r["decision_ms_median"] >= 0.0


def test_parse_seeds():
    assert bench.parse_seeds("42-44,50") == [42, 43, 44, 50]


def test_bench_rejects_unknown_policy(files):
    nodes, pods = files
    with pytest.raises(SystemExit):
        bench.main(["--nodes", str(nodes), "--pods", str(pods), "--policies", "nope"])


def test_mig_bench(files, capsys):
    nodes, pods = files
    assert bench.main(["--nodes", str(nodes), "--pods", str(pods), "--policies", "ours", "--seeds", "1", "--mig"]) == 0
    text = capsys.readouterr().out
    assert "mig" in text and "sharing" in text
    converted = mig_bench.convert_nodes(trace.read_nodes(nodes))
    assert {n.model for n in converted} == {"H100-80GB-HBM3", "A100-SXM4-80GB"}
    rows = trace.read_pods(pods)
    assert mig_bench.to_mig(rows[0].shape).mig_profile == "4g.40gb"
    assert mig_bench.to_mig(rows[7].shape).mig_profile == "7g.80gb"
    assert mig_bench.granted_milli(mig_bench.to_mig(rows[6].shape)) == pytest.approx(1000 / 7 * 2)


def test_whatif_adds_nodes_and_mig_layouts(files, capsys):
    nodes, pods = files
    argv = ["--nodes", str(nodes), "--pods", str(pods), "--policy", "ours"]
    assert whatif.main(argv) == 0
    base = capsys.readouterr().out
    assert "5 nodes, 23 GPUs" in base
    more = [*argv, "--add", "1x4xA100-SXM4-80GB", "--mig", "node=whatif-a100-sxm4-80gb-0,config=all-1g.10gb",
            "--remove", "n4"]  # fmt: skip
    assert whatif.main(more) == 0
    text = capsys.readouterr().out
    assert "5 nodes, 26 GPUs" in text and "1 MIG nodes" in text
    with pytest.raises(SystemExit):
        whatif.main([*argv, "--mig", "node=n0,config=all-1g.10gb"])  # G2 cannot do MIG


def test_whatif_mig_instances_take_sharing_pods(tmp_path):
    nodes = trace.read_nodes(write_nodes(tmp_path / "n.csv", [("m", 64_000, 262_144, 1, "A100-SXM4-80GB")]))
    state, pool = whatif.build_cluster(nodes, {"m": "all-1g.10gb"})
    assert len(pool) == 7
    shapes = [r.shape for r in trace.read_pods(write_pods(tmp_path / "p.csv", [(1000, 1000, 1, 100, "")] * 8))]
    out = whatif.replay_whatif(state, pool, shapes, make_policy("ours", shapes, np.random.default_rng(0)))
    assert out.placed == 7 and out.on_mig == 7 and out.failed["sharing"] == 1
    assert out.held_milli == pytest.approx(1000.0)


def test_whatif_timed_queues_a_pod_until_another_leaves(tmp_path):
    nodes = trace.read_nodes(write_nodes(tmp_path / "n.csv", [("only", 32_000, 65_536, 1, "G2")]))
    state, pool = whatif.build_cluster(nodes, {})
    gpu = PodShape(1000, 1024, 1, 1000)
    rows = [
        trace.PodRow("a", gpu, created=0, deleted=100),
        trace.PodRow("b", gpu, created=10, deleted=50, scheduled=10),  # runs 40 s once it can start
        trace.PodRow("c", PodShape(1000, 1024), created=20, deleted=30),  # CPU only: starts at once
    ]
    out = whatif.replay_timed(state, pool, rows, make_policy("bestfit", [], np.random.default_rng(0)))
    assert (out.offered, out.never, out.peak_queue) == (3, 0, 1)
    assert sorted(out.waits) == [0.0, 0.0, 90.0]  # b waited from 10 until a left at 100
    assert out.span == 140.0 and out.held_milli_seconds == 140.0 * 1000  # the GPU was never idle
    text = whatif.report_timed(state, out)
    assert "3/3 started" in text and "max 90" in text and "mean 100.00%" in text


def test_whatif_timed_from_the_command_line(files, capsys):
    nodes, pods = files
    assert whatif.main(["--nodes", str(nodes), "--pods", str(pods), "--timed"]) == 0
    assert "queue wait (s)" in capsys.readouterr().out
