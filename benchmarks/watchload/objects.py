"""Katib Experiments, Trials and the TrainJobs they own, as a real cluster serves them.

What each object carries, and where it comes from upstream:

- TrainJob name and namespace = the Trial's (katib pkg/controller.v1beta1/experiment/manifest/generator.go,
  ``GetRunSpecWithHyperParameters``: ``runSpec.SetName(trialName)``), one controller ownerReference to the
  Trial (katib pkg/controller.v1beta1/trial/trial_controller.go, ``getDesiredJobSpec``:
  ``SetControllerReference``), labels from the trial template's metadata (here a Kueue queue label),
  ``spec`` as the trial template with the CRD's defaults applied (``managedBy``, ``suspend``,
  ``runtimeRef.apiGroup/kind``, from trainer.kubeflow.org_trainjobs.yaml).
- ``managedFields``: the creator (katib-controller, Update), Kueue resuming it (Update of spec.suspend),
  the trainer controller's status (trainer pkg/controller/trainjob_controller.go: ``Status().Patch``,
  subresource status: conditions, jobsStatus) and the status server's server-side apply of
  ``trainerStatus`` with field owner ``trainer-status`` (trainer pkg/statusserver/server.go,
  ``handleTrainJobRuntimeStatus``), whose ``time`` moves with every apply.
- ``status.conditions``: ``Suspended=False`` reason ``Resumed``, message ``TrainJob is resumed`` (trainer
  pkg/constants/constants.go); ``jobsStatus`` for the initializers and the ``node`` job.
- Trial names are ``<experiment>-<8 characters of k8s.io/apimachinery/pkg/util/rand.String>`` (katib
  pkg/controller.v1beta1/suggestion/suggestionclient/suggestionclient.go); Trials carry the
  ``katib.kubeflow.org/experiment`` label (katib pkg/controller.v1beta1/util, ``TrialLabels``) and a
  controller ownerReference to their Experiment (experiment_controller_util.go, ``getTrialInstance``).

Objects are serialised as the API server serialises unstructured objects (Go's encoding/json: compact,
map keys sorted). ``UpdateEncoder`` produces the bytes of a TrainJob after a status update by filling a
per-job template; it is byte-identical to serialising the whole object (checked by ``self_check``).
The Trial and Experiment objects themselves are built in benchmarks/watchload/katib_objects.py.
"""

from __future__ import annotations

import json
import math
import random
import time
import uuid
from dataclasses import dataclass
from typing import Any

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
KATIB_API = "kubeflow.org/v1beta1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
RAND_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand alphanums
IMAGE = "registry.example.com/ml/llm-finetune:2026.03.1"
STEPS_PER_TRIAL = 1440  # a 2-hour trial reporting every 5 s


def dumps(obj: Any) -> str:
    """Go's encoding/json for unstructured objects: compact, map keys sorted."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def rfc3339(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch_s)))


@dataclass(frozen=True, slots=True)
class Experiment:
    namespace: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Job:
    """One Trial and the TrainJob it owns (same name and namespace)."""

    index: int
    experiment: Experiment
    name: str
    trial_uid: str
    job_uid: str
    lr: str
    batch: str

    @property
    def namespace(self) -> str:
        return self.experiment.namespace


def fleet(
    jobs: int, *, trials_per_experiment: int = 100, experiments_per_namespace: int = 10, seed: int = 0
) -> tuple[list[Experiment], list[Job]]:
    """``jobs`` running trials spread over experiments of ``trials_per_experiment`` each."""
    rng = random.Random(seed)

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    experiments = [
        Experiment(f"team-{e // experiments_per_namespace:02d}", f"sweep-{e:03d}", uid())
        for e in range(math.ceil(jobs / trials_per_experiment))
    ]
    out: list[Job] = []
    seen: set[str] = set()
    for i in range(jobs):
        exp = experiments[i // trials_per_experiment]
        while True:
            name = f"{exp.name}-{''.join(rng.choice(RAND_ALPHABET) for _ in range(8))}"
            if name not in seen:
                seen.add(name)
                break
        lr = f"{10 ** rng.uniform(-5, -3):.6g}"
        out.append(Job(i, exp, name, uid(), uid(), lr, str(rng.choice((8, 16, 32)))))
    return experiments, out


def trainer_status(job: Job, step: int, epoch_s: int) -> dict[str, Any]:
    """The ``trainerStatus`` a Hugging Face Trainer run reports (loss, learning rate, epoch, eval_*)."""
    start = (job.index * 37) % 60  # trials are at different points of their run
    done = min(STEPS_PER_TRIAL, start * STEPS_PER_TRIAL // 100 + step)
    frac = done / STEPS_PER_TRIAL
    wiggle = ((job.index * 7919 + step * 104729) % 1000) / 1000 - 0.5
    loss = 2.4 * math.exp(-3.0 * frac) + 0.35 + 0.02 * wiggle
    return {
        "lastUpdatedTime": rfc3339(epoch_s),
        "progressPercentage": int(100 * frac),
        "estimatedRemainingSeconds": (STEPS_PER_TRIAL - done) * 5,
        "metrics": [
            {"name": "loss", "value": f"{loss:.4f}"},
            {"name": "grad_norm", "value": f"{1.8 * (1 - frac) + 0.4 + 0.1 * wiggle:.6g}"},
            {"name": "learning_rate", "value": f"{float(job.lr) * (1 - frac):.6g}"},
            {"name": "epoch", "value": f"{3 * frac:.4g}"},
            {"name": "eval_loss", "value": f"{loss + 0.05:.4f}"},
            {"name": "eval_accuracy", "value": f"{min(0.99, 0.45 + 0.5 * frac - 0.01 * wiggle):.4f}"},
        ],
    }


def trainer_spec(job: Job) -> dict[str, Any]:
    return {
        "image": IMAGE,
        "command": [
            "python3",
            "/workspace/train.py",
            "--model=meta-llama/Llama-3.2-1B",
            f"--learning-rate={job.lr}",
            f"--per-device-train-batch-size={job.batch}",
            "--num-train-epochs=3",
            "--logging-steps=10",
        ],
        "env": [{"name": "HF_HOME", "value": "/workspace/cache"}, {"name": "NCCL_DEBUG", "value": "WARN"}],
        "numNodes": 2,
        "resourcesPerNode": {
            "limits": {"nvidia.com/gpu": "1"},
            "requests": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"},
        },
    }


def owner_reference(api_version: str, kind: str, name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "blockOwnerDeletion": True,
        "controller": True,
        "kind": kind,
        "name": name,
        "uid": uid,
    }


def _managed(
    manager: str, operation: str, when: str, fields: dict[str, Any], sub: str = ""
) -> dict[str, Any]:
    entry = {
        "apiVersion": TRAINER_API,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
        "manager": manager,
        "operation": operation,
        "time": when,
    }
    if sub:
        entry["subresource"] = sub
    return entry


def _trainjob_managed_fields(job: Job, created: str) -> list[dict[str, Any]]:
    leaf: dict[str, Any] = {}
    katib = {
        "f:metadata": {
            "f:labels": {".": {}, f"f:{QUEUE_LABEL}": {}},
            "f:ownerReferences": {".": {}, f'k:{{"uid":"{job.trial_uid}"}}': {}},
        },
        "f:spec": {
            ".": {},
            "f:runtimeRef": {".": {}, "f:name": {}},
            "f:trainer": {
                ".": {},
                "f:command": {},
                "f:env": {},
                "f:image": {},
                "f:numNodes": {},
                "f:resourcesPerNode": {
                    ".": {},
                    "f:limits": {".": {}, "f:nvidia.com/gpu": {}},
                    "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}, "f:nvidia.com/gpu": {}},
                },
            },
        },
    }
    condition = {
        ".": {},
        **{f"f:{k}": leaf for k in ("lastTransitionTime", "message", "reason", "status", "type")},
    }
    return [
        _managed("katib-controller", "Update", created, katib),
        _managed("kueue", "Update", created, {"f:spec": {"f:suspend": {}}}),
        _managed(
            "manager",
            "Update",
            created,
            {
                "f:status": {
                    ".": {},
                    "f:conditions": {".": {}, 'k:{"type":"Suspended"}': condition},
                    "f:jobsStatus": {},
                }
            },
            "status",
        ),
    ]


def _status_server_fields(when: str) -> dict[str, Any]:
    fields = {
        "f:status": {
            "f:trainerStatus": {
                "f:estimatedRemainingSeconds": {},
                "f:lastUpdatedTime": {},
                "f:metrics": {},
                "f:progressPercentage": {},
            }
        }
    }
    return _managed("trainer-status", "Apply", when, fields, "status")


def trainjob(job: Job, rv: str, created: str, status: Any = None, applied: str = "") -> dict[str, Any]:
    """The TrainJob of ``job``; ``status`` is its current trainerStatus (None before the first report)."""
    managed = _trainjob_managed_fields(job, created)
    body: dict[str, Any] = {
        "conditions": [
            {
                "lastTransitionTime": created,
                "message": "TrainJob is resumed",
                "reason": "Resumed",
                "status": "False",
                "type": "Suspended",
            }
        ],
        "jobsStatus": [
            {
                "active": 0,
                "failed": 0,
                "name": "dataset-initializer",
                "ready": 0,
                "succeeded": 1,
                "suspended": 0,
            },
            {
                "active": 0,
                "failed": 0,
                "name": "model-initializer",
                "ready": 0,
                "succeeded": 1,
                "suspended": 0,
            },
            {"active": 2, "failed": 0, "name": "node", "ready": 2, "succeeded": 0, "suspended": 0},
        ],
    }
    if status is not None:
        managed.append(_status_server_fields(applied))
        body["trainerStatus"] = status
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {
            "creationTimestamp": created,
            "generation": 2,
            "labels": {QUEUE_LABEL: "gpu-a100"},
            "managedFields": managed,
            "name": job.name,
            "namespace": job.namespace,
            "ownerReferences": [owner_reference(KATIB_API, "Trial", job.name, job.trial_uid)],
            "resourceVersion": rv,
            "uid": job.job_uid,
        },
        "spec": {
            "managedBy": "trainer.kubeflow.org/trainjob-controller",
            "runtimeRef": {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "ClusterTrainingRuntime",
                "name": "torch-distributed",
            },
            "suspend": False,
            "trainer": trainer_spec(job),
        },
        "status": body,
    }


_RV, _APPLIED, _STATUS = "\x00rv\x00", "\x00applied\x00", "\x00status\x00"


class UpdateEncoder:
    """Bytes of TrainJob ``i`` after a trainerStatus update, from a per-job template (no full dumps)."""

    def __init__(self, jobs: list[Job], created: str) -> None:
        self.jobs = jobs
        self.created = created
        self._templates: list[list[tuple[str, str]] | None] = [None] * len(jobs)

    def _template(self, i: int) -> list[tuple[str, str]]:
        found = self._templates[i]
        if found is not None:
            return found
        text = dumps(trainjob(self.jobs[i], _RV, self.created, _STATUS, _APPLIED))
        tokens = {dumps(_RV): "rv", dumps(_APPLIED): "applied", dumps(_STATUS): "status"}
        parts: list[tuple[str, str]] = []
        rest = text
        while True:
            hits = [(rest.find(tok), tok) for tok in tokens if tok in rest]
            if not hits:
                parts.append((rest, ""))
                break
            pos, tok = min(hits)
            parts.append((rest[:pos], tokens[tok]))
            rest = rest[pos + len(tok) :]
        self._templates[i] = parts
        return parts

    def encode(self, i: int, rv: int, step: int, epoch_s: int) -> str:
        values = {
            "rv": f'"{rv}"',
            "applied": f'"{rfc3339(epoch_s)}"',
            "status": dumps(trainer_status(self.jobs[i], step, epoch_s)),
        }
        return "".join(text + (values[key] if key else "") for text, key in self._template(i))

    def full(self, i: int, rv: int, step: int, epoch_s: int) -> dict[str, Any]:
        """The same object built whole (reference for ``encode``; step 0 = no trainerStatus yet)."""
        if step == 0:
            return trainjob(self.jobs[i], str(rv), self.created)
        return trainjob(
            self.jobs[i], str(rv), self.created, trainer_status(self.jobs[i], step, epoch_s), rfc3339(epoch_s)
        )

    def self_check(self, i: int = 0) -> None:
        now = int(time.time())
        if self.encode(i, 12345, 3, now) != dumps(self.full(i, 12345, 3, now)):
            raise AssertionError("UpdateEncoder template differs from the serialised object")
