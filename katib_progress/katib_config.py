"""``katib-progress katib-config merge|remove``: our entries in Katib's katib-config, nothing else.

Katib keeps its whole configuration as ONE YAML string (ConfigMap ``katib-config``, key
``katib-config.yaml``), so a kustomize patch cannot add list entries inside it, and shipping a whole
file would replace the cluster's own settings (a Kubeflow-platform install runs cert-manager with
``certGenerator`` off; others enable leader election, custom images, extra algorithms). This command
reads the live ConfigMap (``kubectl get -o yaml``) or a KatibConfig file, changes ONLY what we own,
writes the result in the same form, and says on stderr whether katib-controller must be restarted:

- ``runtime.suggestions``: the ``kp-*`` algorithms (our suggestion image), added or replaced by name;
- ``runtime.earlyStoppings``: ``katib-progress`` and ``kp-medianstop`` (Katib's medianstop, live, for
  Push trials too), both our early-stopping image, added or replaced;
- ``init.controller.trialResources``: ``TrainJob.v1alpha1.trainer.kubeflow.org`` appended when
  missing (never removed; when the list is absent or empty Katib uses its default ``Job.v1.batch``,
  pkg/apis/config/v1beta1/defaults.go ``setControllerConfig``, so that entry is written first).

Every other key, list entry and value is kept as parsed (comments and formatting are not: the
document is re-serialised when something changes; an unchanged KatibConfig file is written back byte
for byte). ``remove`` takes our ``kp-*`` and ``katib-progress`` entries out again and leaves
``trialResources`` alone (TrainJob is stock in Katib's own configs).

When Katib reads what (kubeflow/katib, checked at commit 33c8ff4):

- ``init`` only at start: cmd/katib-controller/v1beta1/main.go ``main`` calls
  pkg/util/v1beta1/katibconfig/config.go ``GetInitConfigData`` (``fromFile``) on ``--katib-config``,
  a file the Deployment mounts from the ConfigMap with ``subPath``
  (manifests/v1beta1/components/controller/controller.yaml), which never sees ConfigMap updates; the
  trial resources become GVKs in viper and pkg/controller.v1beta1/trial/trial_controller.go ``add``
  sets up one watch per resource once. A new trial resource therefore needs a restart.
- ``runtime`` on every use: ``GetSuggestionConfigData`` / ``GetEarlyStoppingConfigData``
  (``fromConfigMap``, the manager's cached client, kept current by a watch) are called by the
  Experiment webhook (pkg/webhook/v1beta1/experiment/validator/validator.go
  ``validateAlgorithm``/``validateEarlyStopping``) and for every Suggestion reconcile
  (pkg/controller.v1beta1/suggestion/composer/composer.go ``DesiredDeployment``). No restart.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from katib_progress import clikit
from katib_progress.core.names import ALGORITHM_PREFIX, EARLY_STOPPING_ALGORITHMS

#: The search algorithms our suggestion image serves, registered as ``kp-<name>`` so Katib's stock
#: entries (``tpe``, ``random``...) keep their upstream images (the service strips the prefix).
ALGORITHMS = (
    "tpe",
    "multivariate-tpe",
    "cmaes",
    "random",
    "grid",
    "gp",
    "qmc",
    "tuned-tpe",
    # Katib's own names for what the samplers above serve (docs/suggestion.md)
    "sobol",
    "bayesianoptimization",
    "hyperband",
)
TRAINJOB_RESOURCE = "TrainJob.v1alpha1.trainer.kubeflow.org"
#: pkg/apis/config/v1beta1/defaults.go ``DefaultTrialResources``: what Katib uses for an absent/empty list.
KATIB_DEFAULT_TRIAL_RESOURCES = ("Job.v1.batch",)
#: The images as ``make images`` names them (``katib-progress/<component>:<package version>``); a
#: registry goes in front (``REGISTRY/katib-progress/suggestion:0.1.0``; releases:
#: ``ghcr.io/<owner>/katib-progress/...``). tests/test_manifests.py keeps the tag at the package version.
IMAGE_TAG = "0.1.0"
DEFAULT_SUGGESTION_IMAGE = f"katib-progress/suggestion:{IMAGE_TAG}"
DEFAULT_EARLYSTOPPING_IMAGE = f"katib-progress/earlystopping:{IMAGE_TAG}"
CONFIGMAP_NAME = "katib-config"
CONFIGMAP_KEY = "katib-config.yaml"
#: pkg/controller.v1beta1/consts/const.go ``DefaultKatibNamespace`` (``$KATIB_CORE_NAMESPACE`` or this).
KATIB_NAMESPACE = "kubeflow"
#: Fields the API server sets; a manifest piped to ``kubectl apply`` must not carry them.
_SERVER_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
    "generation",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

# No readOnlyRootFilesystem: katib-config cannot give the pod a writable emptyDir, and the Optuna
# and scikit-learn stacks may write temporary files.
_SUGGESTION_SECURITY_CONTEXT: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def algorithm_names() -> tuple[str, ...]:
    """The ``algorithmName`` values ``merge`` registers."""
    return tuple(ALGORITHM_PREFIX + name for name in ALGORITHMS)


def _suggestion_entry(name: str, image: str, pull_policy: str) -> dict[str, Any]:
    return {
        "algorithmName": name,
        "image": image,
        "imagePullPolicy": pull_policy,
        "resources": {
            "requests": {"cpu": "100m", "memory": "256Mi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "securityContext": copy.deepcopy(_SUGGESTION_SECURITY_CONTEXT),
    }


def _early_stopping_entry(name: str, image: str, pull_policy: str) -> dict[str, Any]:
    # Katib lets only image, pull policy and resources be set for this container (composer.go
    # desiredContainers). It runs the pruning engine (EarlyStopping + Pruning APIs on 6788, about
    # 125 MiB resident when idle); the image's CMD carries its whole command line (docs/deploy.md).
    return {
        "algorithmName": name,
        "image": image,
        "imagePullPolicy": pull_policy,
        "resources": {
            "requests": {"cpu": "50m", "memory": "192Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
    }


def _entries(section: dict[str, Any], key: str, field: str) -> list[Any]:
    entries = section.get(key)
    entries = [] if entries is None else entries
    if not isinstance(entries, list):
        raise ValueError(f"{field} must be a list, got {entries!r}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or "algorithmName" not in entry:
            raise ValueError(f"{field}[{i}] must be a mapping with algorithmName, got {entry!r}")
    return entries


def _upsert(entries: list[Any], new: Mapping[str, Any]) -> list[Any]:
    """Every entry with the same algorithmName replaced in place (Katib uses the last one,
    config.go ``GetSuggestionConfigData``), or ``new`` appended."""
    out = [dict(new) if e["algorithmName"] == new["algorithmName"] else e for e in entries]
    return out if any(e["algorithmName"] == new["algorithmName"] for e in entries) else [*out, dict(new)]


def _section(parent: dict[str, Any], key: str, field: str) -> dict[str, Any]:
    value = parent.get(key)
    if value is None:
        value = parent[key] = {}
    if not isinstance(value, dict):
        raise ValueError(f"{field} must be a mapping, got {value!r}")
    return value


def _check(config: Mapping[str, Any]) -> dict[str, Any]:
    if config.get("kind") != "KatibConfig":
        raise ValueError(f"kind must be KatibConfig, got {config.get('kind')!r}")
    return copy.deepcopy(dict(config))


def merge_config(
    config: Mapping[str, Any],
    *,
    suggestion_image: str = DEFAULT_SUGGESTION_IMAGE,
    earlystopping_image: str = DEFAULT_EARLYSTOPPING_IMAGE,
    pull_policy: str = "IfNotPresent",
) -> dict[str, Any]:
    """A copy of ``config`` (a KatibConfig) with our entries merged in (module docstring)."""
    for name, value in (("suggestion_image", suggestion_image), ("earlystopping_image", earlystopping_image)):
        if not value or any(c.isspace() for c in value):
            raise ValueError(f"{name} must be a non-empty image reference, got {value!r}")
    if pull_policy not in ("Always", "IfNotPresent", "Never"):
        raise ValueError(f"pull_policy must be Always, IfNotPresent or Never, got {pull_policy!r}")
    out = _check(config)
    runtime = _section(out, "runtime", "runtime")
    suggestions = _entries(runtime, "suggestions", "runtime.suggestions")
    early = _entries(runtime, "earlyStoppings", "runtime.earlyStoppings")
    for name in algorithm_names():
        suggestions = _upsert(suggestions, _suggestion_entry(name, suggestion_image, pull_policy))
    runtime["suggestions"] = suggestions
    for name in EARLY_STOPPING_ALGORITHMS:
        early = _upsert(early, _early_stopping_entry(name, earlystopping_image, pull_policy))
    runtime["earlyStoppings"] = early
    controller = _section(_section(out, "init", "init"), "controller", "init.controller")
    resources = controller.get("trialResources") or list(KATIB_DEFAULT_TRIAL_RESOURCES)
    if not isinstance(resources, list):
        raise ValueError(f"init.controller.trialResources must be a list, got {resources!r}")
    if TRAINJOB_RESOURCE not in resources:
        controller["trialResources"] = [*resources, TRAINJOB_RESOURCE]
    return out


def remove_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` without our ``kp-*`` suggestion and our early-stopping entries."""
    out = _check(config)
    runtime = out.get("runtime")
    if runtime is None:
        return out
    if not isinstance(runtime, dict):
        raise ValueError(f"runtime must be a mapping, got {runtime!r}")
    ours = {"suggestions": set(algorithm_names()), "earlyStoppings": set(EARLY_STOPPING_ALGORITHMS)}
    for key, names in ours.items():
        if runtime.get(key) is not None:
            entries = _entries(runtime, key, f"runtime.{key}")
            runtime[key] = [e for e in entries if e["algorithmName"] not in names]
    return out


@dataclass(frozen=True)
class Result:
    """What ``merge``/``remove`` produced: the text to write and what changed."""

    text: str
    changes: tuple[str, ...]
    #: an ``init`` value changed: katib-controller reads it only at start (module docstring)
    restart_needed: bool
    #: Katib's namespace (the ConfigMap's, else Katib's default)
    namespace: str

    def advice(self) -> str:
        """The lines for stderr: each change, then whether katib-controller must be restarted."""
        if not self.changes:
            return "katib-config: already up to date, nothing changed; no katib-controller restart needed.\n"
        lines = [f"katib-config: {change}" for change in self.changes]
        if self.restart_needed:
            lines.append(
                "katib-config: RESTART NEEDED after applying: katib-controller reads "
                "init.controller.trialResources only when it starts (main.go -> katibconfig."
                "GetInitConfigData, a subPath-mounted file). Run: kubectl -n "
                f"{self.namespace} rollout restart deployment/katib-controller"
            )
        else:
            lines.append(
                "katib-config: no katib-controller restart needed: Katib reads runtime.suggestions and "
                "runtime.earlyStoppings from the ConfigMap on every use (katibconfig."
                "GetSuggestionConfigData / GetEarlyStoppingConfigData)."
            )
        return "\n".join(lines) + "\n"


def _names(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    runtime = config.get("runtime") or {}
    return {e["algorithmName"]: e for e in runtime.get(key) or []}


def _trial_resources(config: Mapping[str, Any]) -> list[Any]:
    controller = (config.get("init") or {}).get("controller") or {}
    return list(controller.get("trialResources") or [])


def describe_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> tuple[str, ...]:
    """One line per entry of ours added, updated or removed, and per trial resource added."""
    out: list[str] = []
    for key in ("suggestions", "earlyStoppings"):
        old, new = _names(before, key), _names(after, key)
        for name in [n for n in new if n not in old]:
            out.append(f"added runtime.{key} {name}")
        for name in [n for n in new if n in old and new[n] != old[n]]:
            out.append(f"updated runtime.{key} {name}")
        for name in [n for n in old if n not in new]:
            out.append(f"removed runtime.{key} {name}")
    old_resources = _trial_resources(before)
    for resource in _trial_resources(after):
        if resource not in old_resources:
            out.append(f"added {resource} to init.controller.trialResources")
    return tuple(out)


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings (the ConfigMap's katib-config.yaml) as ``|`` literals."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(doc: Mapping[str, Any]) -> str:
    return yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=4096)


def _load(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise ValueError("input must be a YAML mapping: the katib-config ConfigMap or a KatibConfig")
    return doc


def _clean_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: copy.deepcopy(v) for k, v in metadata.items() if k not in _SERVER_METADATA}
    annotations = {k: v for k, v in (out.get("annotations") or {}).items() if k != _LAST_APPLIED}
    if annotations:
        out["annotations"] = annotations
    else:
        out.pop("annotations", None)
    return out


def transform(text: str, edit: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Result:
    """Apply ``edit`` (KatibConfig -> KatibConfig) to ``text``: the live ConfigMap (written back as a
    ConfigMap for ``kubectl apply``, server-set metadata dropped) or a KatibConfig document."""
    doc = _load(text)
    if doc.get("kind") == "ConfigMap":
        data = doc.get("data") or {}
        if CONFIGMAP_KEY not in data:
            raise ValueError(f"ConfigMap data has no key {CONFIGMAP_KEY!r}")
        before = _load(data[CONFIGMAP_KEY])
        after = edit(before)
        changes = describe_changes(before, after)
        inner = dump(after) if changes else data[CONFIGMAP_KEY]
        configmap = {k: copy.deepcopy(v) for k, v in doc.items() if k != "status"}
        configmap["metadata"] = _clean_metadata(doc.get("metadata") or {})
        configmap["data"] = {**data, CONFIGMAP_KEY: inner}
        namespace = str(configmap["metadata"].get("namespace") or KATIB_NAMESPACE)
        out = dump(configmap)
    else:
        before = doc
        after = edit(before)
        changes = describe_changes(before, after)
        out = dump(after) if changes else text
        namespace = KATIB_NAMESPACE
    restart = _trial_resources(before) != _trial_resources(after)
    return Result(text=out, changes=changes, restart_needed=restart, namespace=namespace)


def merge_text(text: str, **options: Any) -> Result:
    """``katib-config merge`` on the text of the live ConfigMap or a KatibConfig."""
    return transform(text, lambda config: merge_config(config, **options))


def remove_text(text: str) -> Result:
    """``katib-config remove`` on the text of the live ConfigMap or a KatibConfig."""
    return transform(text, remove_config)


OUTPUT_FORMATS = ("yaml", "json")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "katib-config", help="merge (or remove) katib-progress's entries in Katib's katib-config"
    )
    sub = parser.add_subparsers(dest="katib_config_command", metavar="COMMAND", required=True)
    merge = sub.add_parser(
        "merge",
        help="add our kp-* algorithms, katib-progress early stopping and TrainJob; keep everything else",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    remove = sub.add_parser("remove", help="take our kp-* and katib-progress entries out again")
    for command in (merge, remove):
        command.add_argument(
            "-f",
            "--input",
            default="-",
            metavar="FILE",
            help="the live ConfigMap (kubectl get -o yaml) or a KatibConfig (default -, stdin)",
        )
        command.add_argument(
            "-o",
            "--output",
            default=None,
            metavar="FORMAT",
            help="output format: yaml (default) or json (both apply with kubectl apply -f)",
        )
        command.add_argument(
            "--output-file", default=None, metavar="FILE", help="file to write (default: stdout)"
        )
    merge.add_argument(
        "--suggestion-image",
        default=DEFAULT_SUGGESTION_IMAGE,
        metavar="IMAGE",
        help=f"our suggestion image (default {DEFAULT_SUGGESTION_IMAGE})",
    )
    merge.add_argument(
        "--early-stopping-image",
        default=DEFAULT_EARLYSTOPPING_IMAGE,
        metavar="IMAGE",
        help=f"our early-stopping image (default {DEFAULT_EARLYSTOPPING_IMAGE})",
    )
    merge.add_argument(
        "--earlystopping-image",
        dest="early_stopping_image",
        action=clikit.DeprecatedFlag,
        new="--early-stopping-image",
    )
    merge.add_argument("--pull-policy", default="IfNotPresent", choices=("Always", "IfNotPresent", "Never"))
    merge.set_defaults(func=merge_command)
    remove.set_defaults(func=remove_command)


def output_target(output: str | None, output_file: str | None) -> tuple[str, str]:
    """(format, file; ``-`` = stdout) from ``-o`` and ``--output-file`` (clikit.format_or_old_file)."""
    output, output_file = clikit.format_or_old_file(output, output_file, OUTPUT_FORMATS, "--output")
    return output or "yaml", output_file or "-"


def _read_input(path: str) -> str:
    if path != "-":
        return Path(path).read_text(encoding="utf-8")
    if sys.stdin is None or sys.stdin.isatty():
        # a bare `katib-config merge` in a terminal would otherwise wait silently on stdin
        raise ValueError(
            "expects the katib-config ConfigMap on stdin (kubectl -n kubeflow get configmap katib-config "
            "-o yaml | katib-progress katib-config ...) or a file: --input FILE"
        )
    return sys.stdin.read()


def _run(args: argparse.Namespace, run: Callable[[str], Result]) -> int:
    try:
        fmt, output_file = output_target(args.output, args.output_file)
        result = run(_read_input(args.input))
    except (ValueError, yaml.YAMLError, OSError, UnicodeDecodeError) as exc:
        clikit.say("error", f"katib-config {args.katib_config_command}: {clikit.one_line(exc)}")
        return 2
    text = result.text if fmt == "yaml" else json.dumps(yaml.safe_load(result.text), indent=2) + "\n"
    if output_file == "-":
        sys.stdout.write(text)
    else:
        Path(output_file).write_text(text, encoding="utf-8")
    sys.stderr.write(result.advice())
    return 0


def merge_command(args: argparse.Namespace) -> int:
    options = {
        "suggestion_image": args.suggestion_image,
        "earlystopping_image": args.early_stopping_image,
        "pull_policy": args.pull_policy,
    }
    return _run(args, lambda text: merge_text(text, **options))


def remove_command(args: argparse.Namespace) -> int:
    return _run(args, remove_text)
