"""Fixtures of the cluster tests: the whole stack on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from katib_progress.collector.store import start_store_server
from katib_progress.suggestion.server import create_early_stopping_server, create_server
from tests.cluster._harness import Stack, TestFront
from tests.kubestandin import KubeStandin


@pytest.fixture
def stack(kube: KubeStandin, tmp_path: Path) -> Iterator[Stack]:
    store = start_store_server(tmp_path / "observations.sqlite")
    # the two containers of Katib's suggestion pod: our suggestion (6789) and early stopping (6788)
    suggestion = create_server(["127.0.0.1:0"], early_stopping=False)
    suggestion.start()
    early = create_early_stopping_server(["127.0.0.1:0"])
    early.start()
    front = TestFront(kube)
    try:
        yield Stack(kube, store, early.bound_addresses[0], front, suggestion.bound_addresses[0])
    finally:
        front.stop()
        early.stop(0)
        suggestion.stop(0)
        store.stop(0)
