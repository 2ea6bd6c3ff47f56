from collections import Counter

from scheduling.engine.shapes import PodShape
from scheduling.planning import trace
from tests.engine.helpers import write_nodes, write_pods


def test_read_csvs(tmp_path):
    nodes = trace.read_nodes(
        write_nodes(tmp_path / "n.csv", [("a", 64000, 262144, 2, "P100"), ("b", 8000, 1024, 1, "T4")])
    )
    pods = trace.read_pods(write_pods(tmp_path / "p.csv", [(6000, 12288, 1, 460, ""), (4000, 100, 0, 0, ""),
                                                          (12000, 1000, 2, 1000, "T4|P100")]))  # fmt: skip
    assert [n.name for n in nodes] == ["a", "b"] and nodes[0].gpus == 2
    assert pods[0].shape == PodShape(6000, 12288, 1, 460)
    assert pods[1].shape.num_gpu == 0
    assert pods[2].shape.gpu_models == frozenset({"T4", "P100"})
    state = trace.state_from_nodes(nodes)
    assert state.total_gpus == 3 and state.models == ("P100", "T4")


def _rows(n: int) -> list[trace.PodRow]:
    return [trace.PodRow(f"p{i:03d}", PodShape(1000, 1000, 1, 100 * (i % 10 + 1))) for i in range(n)]


def test_workload_inflates_to_target_and_is_seeded():
    pods = _rows(40)  # 40 pods, 22 GPUs of demand
    demand = sum(p.shape.total_milli for p in pods)
    a = trace.workload(pods, total_gpus=20, seed=42)
    b = trace.workload(pods, total_gpus=20, seed=42)
    c = trace.workload(pods, total_gpus=20, seed=43)
    assert a == b and a != c
    total = sum(p.total_milli for p in a)
    assert total >= 1.3 * 20 * 1000 > total - max(p.total_milli for p in a)  # stops as soon as it reaches 130%
    assert Counter(a[:40]) == Counter(p.shape for p in pods)  # the originals come first, shuffled
    assert demand < total


def test_workload_shuffle_starts_from_name_order():
    pods = _rows(30)
    shuffled = list(reversed(pods))
    assert trace.workload(pods, 1000, seed=7) == trace.workload(shuffled, 1000, seed=7)


def test_workload_of_cpu_only_pods_does_not_loop():
    pods = [trace.PodRow("a", PodShape(1000, 1000))]
    assert len(trace.workload(pods, 10, seed=1)) == 1


def test_variant_paths_point_outside_the_repo():
    path = trace.variant_path("default")
    assert path.name == "openb_pod_list_default.csv"
    assert trace.REPO_ROOT not in path.parents
