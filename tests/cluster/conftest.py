"""Fixtures of the cluster tests: the whole stack on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from katib_progress.collector.store import start_store_server
from katib_progress.suggestion.server import create_server
from tests.cluster._harness import Stack, TestFront
from tests.kubestandin import KubeStandin


@pytest.fixture
def stack(kube: KubeStandin, tmp_path: Path) -> Iterator[Stack]:
    store = start_store_server(tmp_path / "observations.sqlite")
    suggestion = create_server(["127.0.0.1:0"])
    suggestion.start()
    front = TestFront(kube)
    try:
        yield Stack(kube, store, suggestion.bound_addresses[0], front)
    finally:
        front.stop()
        suggestion.stop(0)
        store.stop(0)
