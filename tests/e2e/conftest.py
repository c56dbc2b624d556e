"""Fixtures of the end-to-end tier: one real Katib for the session (see cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import RealKatib


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def katib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKatib]:
    with RealKatib(tmp_path_factory.mktemp("e2e")) as cluster:
        yield cluster
