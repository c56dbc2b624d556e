"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.kubestandin import KubeStandin


@pytest.fixture
def kube() -> Iterator[KubeStandin]:
    """A started Kubernetes API server stand-in (see docs/kubestandin.md)."""
    standin = KubeStandin(bookmark_interval=0.2).start()
    try:
        yield standin
    finally:
        standin.stop()
