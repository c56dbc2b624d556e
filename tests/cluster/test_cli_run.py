"""``katib-progress --log-json collector run`` with the Deployment's flags, as a real subprocess."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client

from tests.cluster._harness import LEASE_NS, Stack
from tests.kubestandin.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _lines(stream: Any, out: queue.Queue[dict[str, Any]]) -> None:
    for line in stream:
        try:
            out.put(json.loads(line))
        except json.JSONDecodeError:
            out.put({"message": line})


def test_collector_run_with_deployment_flags(stack: Stack, tmp_path: Path) -> None:
    stack.experiment(settings={"policy": "nop"})
    stack.trial_job("exp-cli")
    kubeconfig = stack.kube.write_kubeconfig(tmp_path / "kubeconfig")
    args = [
        sys.executable, "-m", "katib_progress.cli", "--log-json", "collector", "run",
        f"--kubeconfig={kubeconfig}",
        f"--db-manager={stack.store.address}",
        "--metrics-address=127.0.0.1:0",
        "--leader-elect",
        f"--leader-election-namespace={LEASE_NS}",
        "--leader-election-id=katib-progress-collector",
        "--leader-election-identity=collector-pod-0",
        "--lease-duration=2", "--renew-deadline=1.5", "--retry-period=0.2",
        f"--pruning-address-template={stack.pruning_address}",
    ]  # fmt: skip
    proc = subprocess.Popen(
        args, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True
    )
    logs: queue.Queue[dict[str, Any]] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stderr, logs), daemon=True)
    reader.start()
    seen: list[dict[str, Any]] = []

    def event(name: str) -> dict[str, Any] | None:
        while not logs.empty():
            seen.append(logs.get())
        return next((line for line in seen if line.get("event") == name), None)

    try:
        listening = wait_until(lambda: event("metrics_listening"), timeout=15)
        base = f"http://{listening['address']}"
        wait_until(lambda: event("term_started"), timeout=15)
        lease = client.CoordinationV1Api(stack.front.api_client()).read_namespaced_lease(
            "katib-progress-collector", LEASE_NS
        )
        assert lease.spec.holder_identity == "collector-pod-0"
        for i in range(3):
            stack.report("exp-cli", i, loss=str(1.0 - i / 10))
            wait_until(lambda i=i: len(stack.seqs("exp-cli")) == i + 1, timeout=10)  # type: ignore[misc]
        with urllib.request.urlopen(base + "/readyz", timeout=5) as response:
            assert response.status == 200
        with urllib.request.urlopen(base + "/metrics", timeout=5) as response:
            text = response.read().decode()
        assert "katib_progress_collector_leader 1.0" in text
        assert 'katib_progress_collector_snapshots_total{outcome="written"} 3.0' in text
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(5)
    assert proc.returncode == 0, seen
    stopped = event("stopped")
    assert stopped is not None and stopped["drained"] is True
    lease = client.CoordinationV1Api(stack.front.api_client()).read_namespaced_lease(
        "katib-progress-collector", LEASE_NS
    )
    assert not lease.spec.holder_identity  # released on SIGTERM
    assert stack.seqs("exp-cli") == [0, 1, 2]


def test_deployment_flags_reach_the_cluster_options() -> None:
    from katib_progress.cli import build_parser
    from katib_progress.collector import forwarder
    from katib_progress.collector.cluster_cli import DEFAULT_TEMPLATE, SUGGESTION_TEMPLATE, _options

    args = build_parser().parse_args(
        [
            "--log-json", "collector", "run", "--db-manager=db:6789", "--metrics-address=0.0.0.0:8080",
            "--leader-elect", "--leader-election-namespace=kp", "--leader-election-id=lease-x",
            "--leader-election-identity=pod-1",
        ]
    )  # fmt: skip
    options = _options(args)
    assert options.leader is not None
    assert (options.leader.namespace, options.leader.name, options.leader.identity) == (
        "kp",
        "lease-x",
        "pod-1",
    )
    assert args.metrics_address == "0.0.0.0:8080" and options.identity == "pod-1"
    assert options.forwarder.address_template == DEFAULT_TEMPLATE == forwarder.DEFAULT_TEMPLATE
    assert DEFAULT_TEMPLATE.endswith(":6788")  # Katib's early-stopping port (composer.go)
    suggestion = options.forwarder.suggestion_address_template
    assert suggestion == SUGGESTION_TEMPLATE == forwarder.SUGGESTION_TEMPLATE and suggestion.endswith(":6789")
    no_election = _options(build_parser().parse_args(["collector", "run", "--db-manager=db:6789"]))
    assert no_election.leader is None
