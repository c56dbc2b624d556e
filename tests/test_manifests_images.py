"""Static lint of the Dockerfiles (`make images` builds them; tests/test_images.py checks the rest).

General rules for every image: each FROM pinned to a tag or digest (never ``latest``), a numeric
non-root final USER, exec-form ENTRYPOINT/CMD (no shell in the start path), and a HEALTHCHECK or
a documented ``# Probe:`` line. Per image: the entrypoint, ports and arguments docs/deploy.md names.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.test_manifests import _raw_base

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "images"
PYTHON_BASE = re.compile(r"^python:3\.11\.\d+-slim(-[a-z]+)?$")


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, op: str) -> list[str]:
        return [args for name, args in self.instructions if name == op]


@dataclass
class Dockerfile:
    stages: list[Stage]
    comments: list[str]
    #: ARGs declared before the first FROM, with their defaults (usable in FROM lines)
    args: dict[str, str] = field(default_factory=dict)

    def base(self, stage: Stage) -> str:
        """A stage's FROM with global ARGs replaced by their defaults."""
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.args.get(m[1] or m[2], m[0]), stage.base)

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def parse(text: str) -> Dockerfile:
    stages: list[Stage] = []
    comments: list[str] = []
    globals_: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#"):
            comments.append(line)
            continue
        if not line and not logical:
            continue
        logical += " " + line.removesuffix("\\") if logical else line.removesuffix("\\")
        if line.endswith("\\"):
            continue
        op, _, args = logical.strip().partition(" ")
        op, args, logical = op.upper(), args.strip(), ""
        if op == "FROM":
            parts = args.split()
            stages.append(Stage(parts[0], parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None))
        elif op == "ARG" and not stages:
            name, _, default = args.partition("=")
            globals_[name.strip()] = default.strip().strip('"')
        else:
            assert stages, f"{op} before FROM"
            stages[-1].instructions.append((op, args))
    return Dockerfile(stages, comments, globals_)


def pinned(image: str) -> bool:
    if "@sha256:" in image:
        return True
    name = image.rsplit("/", 1)[-1]
    return ":" in name and name.rsplit(":", 1)[1] not in ("", "latest")


def exec_form(args: str) -> list[str] | None:
    try:
        value = json.loads(args)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


def problems(text: str) -> list[str]:
    """The general rules; an empty list means the Dockerfile passes."""
    df = parse(text)
    found: list[str] = []
    stage_names = {s.name for s in df.stages if s.name}
    for stage in df.stages:
        if stage.base not in stage_names and not pinned(df.base(stage)):
            found.append(f"FROM {df.base(stage)}: not pinned to a tag or digest")
    users = df.final.all("USER")
    uid = users[-1].split(":")[0] if users else "0"
    if not uid.isdigit() or int(uid) == 0:
        found.append(f"final USER {uid!r}: must be a numeric non-root uid")
    for op in ("ENTRYPOINT", "CMD"):
        for args in df.final.all(op):
            if exec_form(args) is None:
                found.append(f"{op} {args}: not exec form")
    if not df.final.all("ENTRYPOINT"):
        found.append("no ENTRYPOINT")
    if not df.final.all("HEALTHCHECK") and not any(c.startswith("# Probe:") for c in df.comments):
        found.append("no HEALTHCHECK and no '# Probe:' comment")
    return found


def _load(path: Path) -> tuple[str, Dockerfile]:
    text = path.read_text()
    return text, parse(text)


ALL_DOCKERFILES = sorted(
    [*IMAGES.glob("*/Dockerfile"), *(ROOT / "examples" / "cluster").glob("*/Dockerfile")]
)


@pytest.mark.parametrize("path", ALL_DOCKERFILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_dockerfile_general_rules(path: Path) -> None:
    text, df = _load(path)
    assert problems(text) == []
    # Every COPY source (outside COPY --from) exists in the build context it documents.
    context = ROOT if path.parent.parent == IMAGES and "COPY pyproject.toml" in text else path.parent
    for stage in df.stages:
        for args in stage.all("COPY"):
            if args.startswith("--from="):
                continue
            for source in args.split()[:-1]:
                assert (context / source).exists(), f"{path}: COPY source {source} missing in {context}"


def test_lint_flags_a_bad_dockerfile() -> None:
    bad = "FROM python\nFROM ubuntu:latest\nRUN pip install x\nUSER root\nENTRYPOINT katib-progress run\n"
    found = problems(bad)
    assert len(found) == 5, found
    assert any("python: not pinned" in p for p in found) and any("ubuntu:latest" in p for p in found)
    assert any("non-root" in p for p in found) and any("exec form" in p for p in found)


@pytest.mark.parametrize("image", ["collector", "suggestion"])
def test_python_images_are_multi_stage_wheel_builds(image: str) -> None:
    _text, df = _load(IMAGES / image / "Dockerfile")
    assert len(df.stages) == 2
    build, final = df.stages
    assert PYTHON_BASE.match(df.base(build)) and final.base == build.base
    assert any("pip install" in run for run in build.all("RUN"))
    assert final.all("RUN") == [], "the runtime stage installs nothing: it copies the built venv"
    assert any(c.startswith(f"--from={build.name} ") for c in final.all("COPY"))
    assert exec_form(final.all("ENTRYPOINT")[-1]) == ["katib-progress"]
    assert exec_form(final.all("HEALTHCHECK")[-1].split(" CMD ", 1)[1]) is not None


def test_suggestion_image_serves_6789_only() -> None:
    # Katib's early-stopping container (ours, medianstop) binds 6788 in the same pod (composer.go)
    _text, df = _load(IMAGES / "suggestion" / "Dockerfile")
    exposed = {port for args in df.final.all("EXPOSE") for port in args.split()}
    assert exposed == {"6789"}
    healthcheck = df.final.all("HEALTHCHECK")[-1]
    assert "manager.v1beta1.Suggestion" in healthcheck and "6789" in healthcheck
    cmd = exec_form(df.final.all("CMD")[-1])
    assert cmd is not None and "6788" not in " ".join(cmd)
    from katib_progress.cli import build_parser

    args = build_parser().parse_args(cmd)
    assert args.address == ["0.0.0.0:6789"] and not args.early_stopping


def test_collector_image_matches_the_deployment() -> None:
    _text, df = _load(IMAGES / "collector" / "Dockerfile")
    assert {p for args in df.final.all("EXPOSE") for p in args.split()} == {"8080"}
    assert "/healthz" in df.final.all("HEALTHCHECK")[-1]
    cmd = exec_form(df.final.all("CMD")[-1])
    assert cmd is not None and cmd[:2] == ["collector", "run"]
    deployment = next(d for d in _raw_base() if d["kind"] == "Deployment")
    pod_uid = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    assert df.final.all("USER")[-1] == f"{pod_uid}:{pod_uid}"


def test_earlystopping_image_serves_6788_from_its_cmd_alone() -> None:
    # Katib sets no command, args or env on the early-stopping container: the CMD carries everything
    _text, df = _load(IMAGES / "earlystopping" / "Dockerfile")
    assert {p for args in df.final.all("EXPOSE") for p in args.split()} == {"6788"}
    assert exec_form(df.final.all("ENTRYPOINT")[-1]) == ["katib-progress"]
    cmd = exec_form(df.final.all("CMD")[-1])
    assert cmd is not None
    from katib_progress.cli import build_parser

    args = build_parser().parse_args(cmd)
    assert args.command == "early-stopping" and args.address == ["0.0.0.0:6788"]
    assert df.final.all("USER")[-1] == "65532:65532"
    config = yaml.safe_load((ROOT / "manifests" / "katib" / "katib-config.yaml").read_text())
    (entry,) = [e for e in config["runtime"]["earlyStoppings"] if e["algorithmName"] == "katib-progress"]
    assert entry["image"].split("/")[-1].startswith("earlystopping:")
