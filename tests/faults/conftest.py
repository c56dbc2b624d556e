"""Fixtures of the fault-injection tests: a real ``db serve`` process and a kubeconfig for the stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults._harness import StoreProc
from tests.kubestandin import KubeStandin
from tests.kubestandin.objects import Objects


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreProc]:
    proc = StoreProc(tmp_path / "observations.sqlite", tmp_path / "store.log").start()
    try:
        yield proc
    finally:
        proc.stop_quietly()


@pytest.fixture
def kubeconfig(kube: KubeStandin, tmp_path: Path) -> Path:
    return kube.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def objs(kube: KubeStandin) -> Objects:
    return Objects(kube.api_client())
