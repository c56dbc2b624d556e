"""RBAC drift: what the collector actually asks the API server for, across its end-to-end scenarios,
must be exactly what manifests/base/rbac.yaml grants (minus the documented unused grants).

tests/test_manifests.py pins the manifest's rules to a literal set; this test pins them to the
code's behaviour instead: a new API call without a grant fails here, and so does a grant nothing uses.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.cluster._harness import BASE, LEASE_NS, NS, Stack, running_collector, wait_leader, wait_until
from tests.kubestandin.objects import TRAINER, trainer_status, trainjob_body

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "base" / "rbac.yaml"

#: Granted but not used by the code, each for a stated reason. Keep in sync with docs/cluster.md.
#: (The test fails when one of these starts being used or is removed from rbac.yaml.)
UNUSED_GRANTS: set[tuple[str, str, str]] = set()


def _granted() -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]], set[str]]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    cluster: set[tuple[str, str, str]] = set()
    namespaced: set[tuple[str, str, str]] = set()
    names: set[str] = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        target = cluster if doc["kind"] == "ClusterRole" else namespaced
        for rule in doc["rules"]:
            names.update(rule.get("resourceNames") or ())
            target.update(
                (g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
            )
    return cluster, namespaced, names


def _scenarios(stack: Stack) -> None:
    """Everything the collector does on a cluster, in one run."""
    stack.experiment(settings={"policy": "divergence"})
    stack.trial_job("exp-p")
    stack.trial_job("exp-done")
    # a lone, watchdog-annotated TrainJob that diverges
    lone = trainjob_body("lone", namespace=NS)
    lone["metadata"]["annotations"] = {"katib-progress.kubeflow.org/watchdog": "true"}
    stack.api.create_namespaced_custom_object(*TRAINER, NS, "trainjobs", lone)
    a = stack.collector(identity="c-a", leader=True, watchdog=True)
    b = stack.collector(identity="c-b", leader=True, watchdog=True)
    with running_collector(a):
        wait_leader(a)
        with running_collector(b):
            # pruning + enforcement
            stack.report("exp-p", 0, loss="1.0")
            wait_until(lambda: len(stack.seqs("exp-p")) == 1)
            stack.report("exp-p", 1, loss="nan")
            wait_until(lambda: stack.trainjob("exp-p")["spec"].get("suspend") is True)
            # someone resumes the pruned job and it reports again: suspended again, Event updated
            stack.api.patch_namespaced_custom_object(
                *TRAINER, NS, "trainjobs", "exp-p", {"spec": {"suspend": False}}
            )
            stack.report("exp-p", 2, loss="nan")
            wait_until(lambda: stack.trainjob("exp-p")["spec"].get("suspend") is True)
            # final metrics marker
            stack.report("exp-done", 0, loss="0.5")
            stack.complete("exp-done")
            wait_until(
                lambda: (
                    (stack.trainjob("exp-done")["metadata"].get("annotations") or {}).get(
                        "katib-progress.kubeflow.org/final-metrics"
                    )
                    == "written"
                )
            )
            # watchdog
            stack.objects.set_status(
                "lone", trainer_status(BASE, progress=10, metrics={"loss": "nan"}), namespace=NS
            )
            wait_until(lambda: stack.trainjob("lone")["spec"].get("suspend") is True)
            # failover
            a.stop()
            wait_leader(b)
    assert a.counters.get("collector_events_total", reason="TrialPruned", result="updated") >= 1


def test_requests_match_the_granted_permissions(stack: Stack) -> None:
    _scenarios(stack)  # the test's own calls go through stack.front, not stack.kube
    cluster, namespaced, names = _granted()
    used_cluster: set[tuple[str, str, str]] = set()
    used_lease: set[tuple[str, str, str]] = set()
    for req in stack.kube.requests:
        resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
        triple = (req.group, resource, req.verb)
        if req.group == "coordination.k8s.io":
            assert req.namespace == LEASE_NS, req
            used_lease.add(triple)
        else:
            used_cluster.add(triple)
    collector_used = used_cluster
    assert collector_used <= cluster, f"used but not granted: {sorted(collector_used - cluster)}"
    assert cluster - collector_used == UNUSED_GRANTS, (
        f"granted but unused (add to UNUSED_GRANTS with a reason, or drop from rbac.yaml): "
        f"{sorted(cluster - collector_used - UNUSED_GRANTS)}; listed as unused but used or not granted: "
        f"{sorted(UNUSED_GRANTS - (cluster - collector_used))}"
    )
    assert used_lease == namespaced, f"lease verbs used {sorted(used_lease)} != granted {sorted(namespaced)}"
    assert names == {"katib-progress-collector"}
