"""Experiments launched side by side at the session's start.

Each Experiment on real Katib waits about 10 s for its suggestion Deployment to become Available
(Katib's composer gives the suggestion container a readiness probe with a 10 s initial delay, and the
played kubelet honours it), and then runs in a few seconds. Scenarios whose Experiments need nothing
of the cluster to themselves register them here at import; the session's ``launched`` fixture
(conftest.py) submits them all at once, each with its own scripted training (cluster.py
``Scripted.route``), and each test then waits for and checks its own. Scenarios that kill components
(test_faults.py) first wait until every launched Experiment has finished (the ``quiet`` fixture).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.e2e.cluster import RealKatib
from tests.katibmodel.scenarios import NS
from tests.katibmodel.trainer import Script


@dataclass(frozen=True)
class Launch:
    body: Callable[[], dict[str, Any]]  # the Experiment
    script: Callable[[], Script]  # its training, played by the Trainer (a fresh script per launch)
    interval_s: float | None = None  # between trainer statuses (the Trainer's default when None)


#: registered at import by the scenario modules, by Experiment name
LAUNCHES: dict[str, Launch] = {}


def register(launch: Launch) -> str:
    name = str(launch.body()["metadata"]["name"])
    if name in LAUNCHES:
        raise ValueError(f"Experiment {name} launched twice")
    LAUNCHES[name] = launch
    return name


def launch_all(katib: RealKatib) -> list[str]:
    names = []
    for name, launch in LAUNCHES.items():
        katib.script.route(name, launch.script(), launch.interval_s)
        katib.submit(launch.body())
        names.append(name)
    return names


def wait_all(katib: RealKatib, names: list[str]) -> None:
    for name in names:
        katib.wait_finished(NS, name, timeout=600)
