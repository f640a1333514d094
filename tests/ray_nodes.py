"""A Ray cluster of two nodes on this machine (``ray.cluster_utils.Cluster``: two raylets, resources ``node_alice``
and ``node_bob``), and the docs' "Across machines" recipe run on it, as a user would from Alice's machine.

    python tests/ray_nodes.py OUT ALICE.csv BOB.csv NEW_ALICE.csv NEW_BOB.csv

Trains into OUT with each organization's actor pinned to its node, predicts the new rows with the finished run,
and prints one JSON line: each party's node ID, the node ID of each resource, and the run's figures. Run in its
own process: the driver joins this cluster, not the test session's local Ray instance.
"""

import json
import sys
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

import train


def main(out: str, alice: str, bob: str, new_alice: str, new_bob: str) -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 2, "resources": {"node_alice": 1}, "include_dashboard": False},
    )
    cluster.add_node(num_cpus=2, resources={"node_bob": 1})
    cluster.wait_for_nodes()
    try:
        common = ["--data.dataset", "csv", "--data.task", "classification", "--run.rounds", "3",
                  "--transport.kind", "ray", "--transport.address", cluster.address]  # fmt: skip
        status = train.main([*common, "--data.csv_files", alice, bob, "--out", out, "--quiet",
                             "--transport.party_nodes", "node_alice", "node_bob"])  # fmt: skip
        assert status == 0, status
        status = train.main(["predict", "--out", out, "--data.csv_files", new_alice, new_bob,
                             "--predictions", str(Path(out) / "predictions.csv"), "--quiet"])  # fmt: skip
        assert status == 0, status
        nodes = {
            name: node["NodeID"]
            for node in ray.nodes()
            for name in node["Resources"]
            if name.startswith("node_") and node["Alive"]
        }
        results = json.loads((Path(out) / "results.json").read_text())
        print(json.dumps({"nodes": nodes, "parties": results["parties"]}))
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:])
