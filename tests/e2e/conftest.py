"""Fixtures of the end-to-end tier: one real Katib for the session (see cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import RealKatib
from tests.e2e.launch import launch_all, wait_all


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def katib(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKatib]:
    with RealKatib(tmp_path_factory.mktemp("e2e")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def launched(katib: RealKatib) -> list[str]:
    """Every registered Experiment (tests/e2e/launch.py), submitted at once on the session's Katib."""
    return launch_all(katib)


@pytest.fixture
def quiet(katib: RealKatib, launched: list[str]) -> None:
    """The session's Katib with every launched Experiment finished: nothing else runs beside the test."""
    wait_all(katib, launched)
