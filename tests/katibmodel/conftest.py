"""Fixtures of the Katib-model tests: one shared DB manager (``katib-progress db serve``), and a
factory of models on a fresh API stand-in."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.katibmodel.harness import DB_SERVICE, KatibModel, start_db_manager, wait_db_manager
from tests.katibmodel.network import ClusterDNS
from tests.katibmodel.trainer import Script
from tests.kubestandin import KubeStandin

ModelFactory = Callable[..., KatibModel]


@pytest.fixture(scope="session")
def db_manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Katib has one DB manager per cluster; the models of this session share ours."""
    workdir = tmp_path_factory.mktemp("katib-db")
    address = f"{ClusterDNS().ip(DB_SERVICE)}:6789"
    proc = start_db_manager(address, workdir)
    try:
        wait_db_manager(address, proc)
        yield address
    finally:
        proc.stop()


@pytest.fixture
def make_model(kube: KubeStandin, tmp_path: Path, db_manager: str) -> Iterator[ModelFactory]:
    models: list[KatibModel] = []

    def factory(script: Script, **kwargs: Any) -> KatibModel:
        model = KatibModel(kube, tmp_path, script, db_address=db_manager, **kwargs)
        models.append(model)
        return model.start()

    try:
        yield factory
    finally:
        for model in models:
            model.stop()
