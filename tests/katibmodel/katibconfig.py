"""katib-config as Katib's controller reads it (pkg/util/v1beta1/katibconfig/config.go).

The runtime section is read from the ConfigMap ``kubeflow/katib-config`` (key ``katib-config.yaml``)
at every use, so edits apply without a restart; the init section (``trialResources``,
``enableGRPCProbeInSuggestion``) is read once when the controller starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.katibmodel._kube import CONFIGMAPS, Kube

#: consts.DefaultKatibNamespace, consts.KatibConfigMapName, consts.LabelKatibConfigTag
KATIB_NAMESPACE = "kubeflow"
CONFIGMAP = "katib-config"
CONFIG_KEY = "katib-config.yaml"

ROOT = Path(__file__).resolve().parents[2]
#: `katib-progress katib-config merge` of Katib's standalone config (manifests/katib): the model's default.
SHIPPED = ROOT / "manifests" / "katib" / "katib-config.yaml"


class KatibConfigError(Exception):
    """What GetSuggestionConfigData / GetEarlyStoppingConfigData return as error."""


def configmap_body(text: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP, "namespace": KATIB_NAMESPACE},
        "data": {CONFIG_KEY: text},
    }


def install(kube: Kube, text: str) -> None:
    """Create or replace ``kubeflow/katib-config`` with ``text`` (a katib-config.yaml document)."""
    current = kube.get(CONFIGMAPS, KATIB_NAMESPACE, CONFIGMAP)
    if current is None:
        kube.create(CONFIGMAPS, KATIB_NAMESPACE, configmap_body(text))
    else:
        kube.update(CONFIGMAPS, {**current, "data": {CONFIG_KEY: text}})


def _document(kube: Kube) -> dict[str, Any]:
    """config.go: fromConfigMap -- the ConfigMap and its key must exist."""
    cm = kube.get(CONFIGMAPS, KATIB_NAMESPACE, CONFIGMAP)
    if cm is None:
        raise KatibConfigError(f'configmaps "{CONFIGMAP}" not found')
    text = (cm.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        raise KatibConfigError(f"failed to find katib-config.yaml in ConfigMap: {CONFIGMAP}")
    doc = yaml.safe_load(text) or {}
    if not isinstance(doc, dict):
        raise KatibConfigError(f"failed to parse katib-config.yaml in ConfigMap: {CONFIGMAP}")
    return doc


def _find(entries: Any, name: str) -> dict[str, Any] | None:
    """config.go: the loop has no break, so the LAST entry with the name wins."""
    found = None
    for entry in entries or ():
        if isinstance(entry, Mapping) and entry.get("algorithmName") == name:
            found = dict(entry)
    return found


def suggestion_config(kube: Kube, algorithm: str) -> dict[str, Any]:
    """config.go: GetSuggestionConfigData (the entry inlines a corev1.Container)."""
    entry = _find((_document(kube).get("runtime") or {}).get("suggestions"), algorithm)
    if entry is None:
        raise KatibConfigError(
            f"failed to find suggestion config for algorithm: {algorithm} in ConfigMap: {CONFIGMAP}"
        )
    if not str(entry.get("image") or "").strip():
        raise KatibConfigError(f"required value for image configuration of algorithm name: {algorithm}")
    return entry


def early_stopping_config(kube: Kube, algorithm: str) -> dict[str, Any]:
    """config.go: GetEarlyStoppingConfigData (image, imagePullPolicy, resources only)."""
    entry = _find((_document(kube).get("runtime") or {}).get("earlyStoppings"), algorithm)
    if entry is None:
        raise KatibConfigError(
            f"failed to find early stopping config for algorithm: {algorithm} in ConfigMap: {CONFIGMAP}"
        )
    if not str(entry.get("image") or "").strip():
        raise KatibConfigError(f"required value for image configuration of algorithm name: {algorithm}")
    return entry


@dataclass(frozen=True)
class InitConfig:
    """The init section, read once at controller start (apis/config/v1beta1/defaults.go)."""

    trial_resources: tuple[str, ...]
    grpc_probe_in_suggestion: bool

    @classmethod
    def read(cls, kube: Kube) -> InitConfig:
        controller = (_document(kube).get("init") or {}).get("controller") or {}
        resources = tuple(controller.get("trialResources") or ("Job.v1.batch",))  # DefaultTrialResources
        probe = controller.get("enableGRPCProbeInSuggestion")
        return cls(resources, True if probe is None else bool(probe))

    def watches_kind(self, api_version: str, kind: str) -> bool:
        """trial_controller.go add(): only trialResources kinds are watched (Kind.version.group)."""
        group, _, version = api_version.rpartition("/")
        return f"{kind}.{version}.{group}" in self.trial_resources
