from collections import Counter
from dataclasses import replace

import pytest

from scheduling.benchmarks import placement as bench
from scheduling.engine.shapes import PodShape
from scheduling.planning import constrain, trace
from tests.engine.helpers import write_nodes, write_pods

NODES = [
    trace.NodeRow("g2a", 96_000, 786_432, 8, "G2"),
    trace.NodeRow("g2b", 96_000, 786_432, 8, "G2"),
    trace.NodeRow("g3", 128_000, 786_432, 8, "G3"),
    trace.NodeRow("t4", 104_000, 393_216, 2, "T4"),
    trace.NodeRow("v16", 32_000, 262_144, 4, "V100M16"),
    trace.NodeRow("v32", 48_000, 262_144, 4, "V100M32"),
    trace.NodeRow("cpu", 64_000, 262_144, 0, ""),
]


def _pods(n: int = 400) -> list[trace.PodRow]:
    shapes = [PodShape(4000, 8192, 1, 500), PodShape(8000, 16384, 1, 1000), PodShape(16000, 65536, 8, 1000),
              PodShape(2000, 4096), PodShape(12000, 32768, 4, 1000)]  # fmt: skip
    return [trace.PodRow(f"p{i:04d}", shapes[i % len(shapes)], i, i + 10, i) for i in range(n)]


def test_the_share_of_gpu_pods_is_constrained_and_nothing_else_changes():
    pods = _pods()
    out = constrain.constrain(pods, NODES, 25, seed=3)
    gpu_pods = [p for p in pods if p.shape.num_gpu]
    constrained = [o for o in out if o.shape.gpu_models]
    assert len(constrained) == round(0.25 * len(gpu_pods))
    assert all(o.shape.num_gpu for o in constrained)  # CPU-only pods are never constrained
    for before, after in zip(pods, out, strict=True):
        assert (before.name, before.created, before.deleted) == (after.name, after.created, after.deleted)
        assert after.shape == replace(before.shape, gpu_models=after.shape.gpu_models)


def test_seeded_and_independent_of_the_lists_order():
    pods = _pods()
    a = constrain.constrain(pods, NODES, 33, seed=7)
    assert a == constrain.constrain(pods, NODES, 33, seed=7)
    assert a != constrain.constrain(pods, NODES, 33, seed=8)
    shuffled = constrain.constrain(list(reversed(pods)), NODES, 33, seed=7)
    assert sorted(shuffled, key=lambda p: p.name) == a


def test_a_constraint_always_names_a_model_whose_nodes_could_hold_the_pod():
    out = constrain.constrain(_pods(), NODES, 100, seed=1)
    by_model = {n.model: n for n in NODES if n.gpus}
    for p in out:
        if p.shape.gpu_models:
            assert any(by_model[m].gpus >= p.shape.num_gpu for m in p.shape.gpu_models), p
    eight = {p.shape.gpu_models for p in out if p.shape.num_gpu == 8}
    # T4 and V100 nodes are too small for an 8-GPU pod
    assert eight and all(models is not None and models & {"G2", "G3"} for models in eight)


def test_sets_are_families_of_similar_models():
    assert constrain.model_sets(NODES) == [frozenset({"G2", "G3"}), frozenset({"V100M16", "V100M32"})]
    out = constrain.constrain(_pods(2000), NODES, 100, seed=2, set_share=0.5)
    specs = Counter(p.shape.gpu_models for p in out if p.shape.gpu_models)
    assert frozenset({"G2", "G3"}) in specs and frozenset({"V100M16", "V100M32"}) in specs
    assert all(len(s) == 1 or s in ({"G2", "G3"}, {"V100M16", "V100M32"}) for s in specs)
    no_sets = constrain.constrain(_pods(), NODES, 100, seed=2, set_share=0.0)
    assert all(len(p.shape.gpu_models or ()) <= 1 for p in no_sets)


def test_bad_shares_are_refused():
    with pytest.raises(ValueError, match="0-100"):
        constrain.constrain(_pods(), NODES, 120, seed=1)
    with pytest.raises(ValueError, match="set_share"):
        constrain.constrain(_pods(), NODES, 10, seed=1, set_share=2)


def test_the_command_writes_a_list_the_benchmark_reads(tmp_path, capsys):
    nodes = write_nodes(tmp_path / "n.csv", [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in NODES])
    pods = write_pods(tmp_path / "p.csv", [(s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli, "")
                                          for s in (p.shape for p in _pods(50))])  # fmt: skip
    out = tmp_path / "c.csv"
    argv = ["--nodes", str(nodes), "--pods", str(pods), "--share", "50", "--seed", "4", "--out", str(out)]
    assert constrain.main(argv) == 0
    assert "20 of 40 GPU pods constrained" in capsys.readouterr().out
    written = trace.read_pods(out)
    assert written == constrain.constrain(trace.read_pods(pods), trace.read_nodes(nodes), 50, seed=4, mix="openb")


def test_the_benchmark_runs_constrained_variants(tmp_path, capsys):
    nodes = write_nodes(tmp_path / "n.csv", [(n.name, n.cpu_milli, n.memory_mib, n.gpus, n.model) for n in NODES])
    pods = write_pods(tmp_path / "p.csv", [(s.cpu_milli, s.memory_mib, s.num_gpu, s.gpu_milli, "")
                                          for s in (p.shape for p in _pods(60))])  # fmt: skip
    argv = ["--nodes", str(nodes), "--pods", str(pods), "--policies", "fgd,ours", "--seeds", "1"]
    assert bench.main([*argv, "--constrain", "10,33"]) == 0
    text = capsys.readouterr().out
    assert "p+gpuspec10" in text and "p+gpuspec33" in text
    with pytest.raises(SystemExit):
        bench.main([*argv, "--constrain", "0"])
