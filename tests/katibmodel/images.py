"""The image map: which local process runs for each image a katib-config names.

No container runtime runs here, and Katib's images may not be copied into this repository, so:

- ``katib-progress/suggestion:*`` and ``katib-progress/earlystopping:*``: the
  ENTRYPOINT + CMD of ``images/suggestion/Dockerfile`` / ``images/earlystopping/Dockerfile``, as the
  uid of their ``USER`` (``/pause`` runs ``tests.katibmodel.stock.pause``, which sleeps until SIGTERM);
- ``registry.k8s.io/pause:*``: ``tests.katibmodel.stock.pause``, uid 65535;
- ``ghcr.io/kubeflow/katib/suggestion-hyperopt:*``: ``tests.katibmodel.stock.hyperopt_random``
  (stand-in, ``random`` only), uid 0;
- ``ghcr.io/kubeflow/katib/earlystopping-medianstop:*``: ``tests.katibmodel.stock.medianstop``
  (stand-in), uid 0.

Our images are read from their Dockerfiles, so the model runs exactly the command a pod would
(``katib-progress`` is the console script of this checkout's virtualenv). Katib's images have no
``USER`` (root); ours run as 65532. Kubernetes' rule applies: a container's ``command`` replaces
the ENTRYPOINT and its ``args`` replace the CMD. Any other image is not modelled: the container
stays ``Waiting`` with reason ``ErrImagePull`` (a pod that cannot start, as on a cluster without
the image).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
IMAGES = ROOT / "images"
_PY = sys.executable
_KP = str(Path(sys.executable).with_name("katib-progress"))


class ImageNotModelled(Exception):
    pass


@dataclass(frozen=True)
class Image:
    entrypoint: tuple[str, ...]
    cmd: tuple[str, ...]
    uid: int
    what: str

    def argv(self, container: Mapping[str, Any]) -> list[str]:
        """Kubernetes: ``command`` replaces ENTRYPOINT (and drops CMD); ``args`` replace CMD."""
        command = container.get("command")
        args = container.get("args")
        entry = list(command) if command else list(self.entrypoint)
        rest = list(args) if args else ([] if command else list(self.cmd))
        return [_local(entry[0]), *entry[1:], *rest] if entry else rest


def _local(program: str) -> str:
    return {"katib-progress": _KP}.get(program, program)


def dockerfile_image(path: Path, what: str) -> Image:
    """ENTRYPOINT, CMD (exec form) and USER of the last stage of a Dockerfile."""
    entry: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    uid = 0
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.upper().startswith("FROM "):
            entry, cmd, uid = (), (), 0  # a new stage starts clean
        elif line.startswith("ENTRYPOINT "):
            entry = tuple(json.loads(line.split(None, 1)[1]))
        elif line.startswith("CMD "):
            cmd = tuple(json.loads(line.split(None, 1)[1]))
        elif line.startswith("USER "):
            uid = int(line.split(None, 1)[1].split(":")[0])
    if entry == ("/pause",):
        entry = (_PY, "-m", "tests.katibmodel.stock.pause")
    return Image(entry, cmd, uid, what)


def _stock(module: str, address: str, what: str) -> Image:
    # upstream main.py binds DEFAULT_PORT = "0.0.0.0:<port>"; the stand-ins take it as a flag
    return Image((_PY, "-m", f"tests.katibmodel.stock.{module}"), ("--address", address), 0, what)


def resolve(image: str) -> Image:
    """The process an image stands for; raises ImageNotModelled."""
    repo = image.rsplit("@", 1)[0]
    name = repo.rsplit(":", 1)[0] if ":" in repo.rsplit("/", 1)[-1] else repo
    if name.endswith("katib-progress/suggestion"):
        return dockerfile_image(IMAGES / "suggestion" / "Dockerfile", "katib-progress suggestion image")
    if name.endswith("katib-progress/earlystopping"):
        return dockerfile_image(
            IMAGES / "earlystopping" / "Dockerfile", "katib-progress early-stopping image"
        )
    if name == "registry.k8s.io/pause":
        return Image((_PY, "-m", "tests.katibmodel.stock.pause"), (), 65535, "pause")
    if name.endswith("kubeflow/katib/suggestion-hyperopt"):
        return _stock("hyperopt_random", "0.0.0.0:6789", "stand-in for Katib's hyperopt suggestion")
    if name.endswith("kubeflow/katib/earlystopping-medianstop"):
        return _stock("medianstop", "0.0.0.0:6788", "stand-in for Katib's medianstop")
    raise ImageNotModelled(f"image {image!r} is not modelled (see tests/katibmodel/images.py)")


def in_pod_network(argv: Sequence[str], pod_ip: str) -> list[str]:
    """The pod's own network namespace: a wildcard bind (``0.0.0.0``/``[::]``) binds the pod IP."""
    return [a.replace("0.0.0.0:", f"{pod_ip}:").replace("[::]:", f"{pod_ip}:") for a in argv]
