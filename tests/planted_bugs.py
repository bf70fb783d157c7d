"""Plausible bugs planted in the constructs to show a test can fail: the size sweep (tests/test_size_sweep.py) and
the lifecycle walk (tests/test_lifecycle_walk.py) each catch them."""

from __future__ import annotations

import yaml


def pool_size_label(original):
    """A plausible bug: once a pool is larger than the example's, each worker's patch labels it with the pool's size
    (a cluster-wide count in a per-node resource)."""

    def patch(placed, cluster_model) -> str:
        text = original(placed, cluster_model)
        if placed.role == "worker" and len(cluster_model.workers) > 3:
            documents = list(yaml.safe_load_all(text))
            labels = documents[0]["machine"].setdefault("nodeLabels", {})
            labels["example.com/pool-size"] = str(len(cluster_model.workers))
            text = yaml.safe_dump_all(documents, sort_keys=False)
        return text

    return patch
