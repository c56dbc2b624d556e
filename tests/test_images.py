"""`make images` without building: the Dockerfiles, the tag scheme and the extras each image installs.

- every Dockerfile `make images` builds takes its base as ``ARG BASE_IMAGE`` (default: the public
  image, pinned), runs as a numeric non-root USER and starts what the manifests and
  ``katib-config merge`` expect (entrypoint, command line, image name);
- each component's extra (pyproject.toml) covers every third-party import of its code (read with
  ``ast``), so an image that installs only that extra imports everything it runs;
- the CLI names the missing extra in one line instead of a traceback.

Building and running the images is `make images` plus tests/e2e/test_images.py (marker ``e2e``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from importlib.metadata import distributions
from pathlib import Path

import pytest
import yaml

from katib_progress import extras
from katib_progress.cli import build_parser, main
from katib_progress.katib_config import DEFAULT_EARLYSTOPPING_IMAGE, DEFAULT_SUGGESTION_IMAGE, merge_text
from tests.test_manifests import _raw_base
from tests.test_manifests_images import exec_form, parse, pinned

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
SCRIPT = (ROOT / "scripts" / "images.sh").read_text()
#: name -> (Dockerfile, the extra it installs; None for the example's trial image)
IMAGES = {
    "collector": (ROOT / "images" / "collector" / "Dockerfile", "collector"),
    "suggestion": (ROOT / "images" / "suggestion" / "Dockerfile", "suggestion"),
    "earlystopping": (ROOT / "images" / "earlystopping" / "Dockerfile", "earlystopping"),
    "example-custom-loop": (ROOT / "examples" / "cluster" / "custom-loop" / "Dockerfile", None),
}
PORTIONS = (ROOT, ROOT / "collector", ROOT / "suggestion")


def global_args(text: str) -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.upper().startswith("FROM "):
            break
        if line.upper().startswith("ARG "):
            name, _, default = line[4:].strip().partition("=")
            found[name] = default
    return found


def default_registry() -> str:
    match = re.search(r"^IMAGE_REGISTRY=\$\{IMAGE_REGISTRY:-([^}]*)\}$", SCRIPT, re.M)
    assert match, "scripts/images.sh sets IMAGE_REGISTRY with a default"
    return match.group(1)


def default_ref(name: str) -> str:
    registry = default_registry()
    return f"{registry + '/' if registry else ''}katib-progress/{name}:{VERSION}"


# -- the Dockerfiles -------------------------------------------------------------------------------


def test_the_script_builds_every_image_under_images_and_the_example() -> None:
    names = re.search(r'^ALL_IMAGES="([^"]+)"$', SCRIPT, re.M)
    assert names and names.group(1).split() == list(IMAGES)
    assert {p.parent.name for p in (ROOT / "images").glob("*/Dockerfile")} == {
        n for n, (path, _) in IMAGES.items() if path.parent.parent.name == "images"
    }
    assert "IMAGE_TAG=${IMAGE_TAG:-$VERSION}" in SCRIPT
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^images:.*\n\tscripts/images\.sh", make, re.M)


@pytest.mark.parametrize("name", list(IMAGES))
def test_dockerfile_takes_its_base_as_an_argument(name: str) -> None:
    path, _extra = IMAGES[name]
    text = path.read_text()
    base = global_args(text).get("BASE_IMAGE")
    assert base and pinned(base), f"{path}: ARG BASE_IMAGE=<public image pinned by tag or digest>"
    df = parse(text)
    names = {s.name for s in df.stages if s.name}
    for stage in df.stages:
        assert stage.base in ("${BASE_IMAGE}", *names), f"{path}: FROM {stage.base}"
    # the same build runs on the public image and on a plain Debian base (python3, not python)
    runs = " ".join(run for stage in df.stages for run in stage.all("RUN"))
    assert "python3 -m venv" in runs and "/usr/local/bin" not in runs
    user = df.final.all("USER")[-1].split(":")
    assert all(part.isdigit() for part in user) and int(user[0]) != 0


@pytest.mark.parametrize("name", [n for n, (_p, e) in IMAGES.items() if e])
def test_python_images_install_only_their_extra(name: str) -> None:
    path, extra = IMAGES[name]
    df = parse(path.read_text())
    build, final = df.stages
    assert build.all("ARG") == [f"EXTRAS={extra}"]
    assert any('pip install ".[${EXTRAS}]"' in run for run in build.all("RUN"))
    assert final.all("RUN") == [], "the runtime stage installs nothing: it copies the venv"
    assert exec_form(final.all("ENTRYPOINT")[-1]) == ["katib-progress"]


def test_the_collector_image_runs_the_deployments_command() -> None:
    deployment = next(d for d in _raw_base() if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "command" not in container, "the Deployment keeps the image's ENTRYPOINT"
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.collector_command) == ("collector", "run")
    kustomization = yaml.safe_load((ROOT / "manifests" / "base" / "kustomization.yaml").read_text())
    (image,) = kustomization["images"]
    assert image["name"] == container["image"]
    assert f"{image['newName']}:{image['newTag']}" == default_ref("collector")
    cmd = exec_form(parse(IMAGES["collector"][0].read_text()).final.all("CMD")[-1])
    assert cmd is not None and build_parser().parse_args(cmd).command == "collector"


@pytest.mark.parametrize(
    ("name", "command", "port"),
    [("suggestion", "suggestion", "6789"), ("earlystopping", "early-stopping", "6788")],
)
def test_katib_starts_our_images_with_their_own_cmd(name: str, command: str, port: str) -> None:
    # katib-config sets image, pull policy and resources only: the CMD carries the whole command line
    merged = yaml.safe_load(merge_text("apiVersion: config.kubeflow.org/v1beta1\nkind: KatibConfig\n").text)
    section = "suggestions" if name == "suggestion" else "earlyStoppings"
    entries = merged["runtime"][section]
    assert entries and all(e["image"] == default_ref(name) for e in entries)
    assert not any({"command", "args"} & set(e) for e in entries)
    assert default_ref(name) in (DEFAULT_SUGGESTION_IMAGE, DEFAULT_EARLYSTOPPING_IMAGE)
    cmd = exec_form(parse(IMAGES[name][0].read_text()).final.all("CMD")[-1])
    assert cmd is not None
    args = build_parser().parse_args(cmd)
    assert args.command == command and args.address == [f"0.0.0.0:{port}"]


def test_the_example_image_runs_the_experiments_command() -> None:
    example = ROOT / "examples" / "cluster" / "custom-loop"
    experiment = yaml.safe_load((example / "experiment.yaml").read_text())
    trainer = experiment["spec"]["trialTemplate"]["trialSpec"]["spec"]["trainer"]
    assert trainer["image"] == default_ref("example-custom-loop")
    entrypoint = exec_form(parse(IMAGES["example-custom-loop"][0].read_text()).final.all("ENTRYPOINT")[-1])
    assert entrypoint == trainer["command"] == ["python3", "/workspace/train.py"]


# -- the extras cover the imports ------------------------------------------------------------------


def module_path(module: str) -> Path | None:
    parts = module.split(".")
    for portion in PORTIONS:
        base = portion.joinpath(*parts)
        for candidate in (base / "__init__.py", base.with_suffix(".py")):
            if candidate.exists():
                return candidate
    return None


def _optional(node: ast.Try) -> bool:
    names = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def imports(path: Path, module: str) -> Iterator[tuple[str, bool]]:
    """(imported module, at module level) for every import of a file, except those under
    ``if TYPE_CHECKING`` and optional ones (``try: ... except ImportError``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, top: bool) -> Iterator[tuple[str, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for stmt in child.orelse:
                    yield from walk(stmt, top)
                continue
            if isinstance(child, ast.Try) and _optional(child):
                continue
            inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, top
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    target = ".".join([*base, child.module] if child.module else base)
                else:
                    target = child.module or ""
                yield target, top
                for alias in child.names:
                    yield f"{target}.{alias.name}", top
            yield from walk(child, inner)

    yield from walk(ast.parse(path.read_text()), True)


def third_party(roots: list[str], *, follow_lazy: bool, count_lazy: bool = True) -> set[str]:
    """Third-party modules imported by ``roots`` and every module of ours they import (at module
    level only, or also inside functions with ``follow_lazy``); a visited file's function-level
    third-party imports count with ``count_lazy``."""
    found: set[str] = set()
    todo, seen = list(roots), set()
    while todo:
        module = todo.pop()
        path = module_path(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(2, len(parts)))  # parent packages run first
        for target, top in imports(path, module):
            if target.split(".")[0] == "katib_progress":
                if top or follow_lazy:
                    todo.append(target)
            elif (top or count_lazy) and target.split(".")[0] not in (*sys.stdlib_module_names, "__future__"):
                found.add(target)
    return found


def modules_under(folder: Path) -> list[str]:
    """The dotted names of the modules in ``folder`` (``.../katib_progress/x`` -> ``katib_progress.x...``)."""
    portion = next(p for p in folder.parents if (p / "katib_progress").is_dir() and p in PORTIONS)
    return [".".join(p.relative_to(portion).with_suffix("").parts) for p in folder.rglob("*.py")]


@cache
def _installed_paths() -> dict[str, set[str]]:
    """Installed module paths (``a/b/c.py`` -> ``a``, ``a.b``, ``a.b.c``) -> their distributions."""
    index: dict[str, set[str]] = {}
    for dist in distributions():
        name = extras.canonical(dist.metadata["Name"])
        for file in dist.files or []:
            parts = file.parts
            if not parts or parts[0].endswith((".dist-info", ".data")) or parts[0] == "..":
                continue
            dotted = [*parts[:-1], parts[-1].removesuffix(".py")] if parts[-1].endswith(".py") else parts[:-1]
            for depth in range(1, len(dotted) + 1):
                index.setdefault(".".join(dotted[:depth]), set()).add(name)
    return index


@cache
def providers(module: str) -> frozenset[str]:
    """The installed distributions holding ``module`` or, for a namespace package such as
    ``kubeflow``, the deepest dotted prefix of it that some distribution holds."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        found = _installed_paths().get(".".join(parts[:depth]))
        if found:
            return frozenset(found)
    return frozenset()


def requires_dist() -> list[str]:
    """pyproject's extras as the installed metadata lists them (``REQ; extra == 'NAME'``)."""
    optional = PYPROJECT["project"]["optional-dependencies"]
    return [f"{req}; extra == '{name}'" for name, reqs in optional.items() for req in reqs]


def extra_requirements(extra: str | None) -> set[str]:
    names = (re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0] for r in PYPROJECT["project"]["dependencies"])
    core = {extras.canonical(name) for name in names}
    return core if extra is None else core | extras.requirements(extra, requires_dist())


#: extra -> (root modules, follow our lazy imports, count lazy third-party imports)
COMPONENTS = {
    # --help, katib-config and the core: the module-level imports of the command line
    None: (
        ["katib_progress.cli", "katib_progress.katib_config", *modules_under(ROOT / "katib_progress/core")],
        False,
        False,
    ),
    # the collector's code, plus what it reaches of the suggestion's pruning through the CLI's
    # backend (validate, connect; engines only with --watchdog, which asks for `suggestion` too)
    "collector": (
        [
            *modules_under(ROOT / "collector/katib_progress/collector"),
            "katib_progress.suggestion.pruning.backend",
        ],
        False,
        True,
    ),
    "suggestion": (modules_under(ROOT / "suggestion/katib_progress/suggestion"), True, True),
    "earlystopping": (["katib_progress.earlystopping_cli"], True, True),
    "report": (["katib_progress.report.cli"], True, True),
    "bench": (["katib_progress.bench_cli"], True, True),
    "all": (["katib_progress.cli"], True, True),
}


@pytest.mark.parametrize("extra", list(COMPONENTS), ids=lambda e: e or "core")
def test_each_extra_covers_its_components_imports(extra: str | None) -> None:
    roots, follow_lazy, count_lazy = COMPONENTS[extra]
    allowed = extra_requirements(extra)
    uncovered = {
        module: sorted(providers(module))
        for module in third_party(roots, follow_lazy=follow_lazy, count_lazy=count_lazy)
        if not providers(module) & allowed
    }
    assert uncovered == {}, f"imports not installed by katib-progress[{extra or ''}]"


def test_the_checker_sees_an_uncovered_import() -> None:
    # the collector's code imports kubernetes, which the core alone does not install
    roots, follow_lazy, count_lazy = COMPONENTS["collector"]
    modules = third_party(roots, follow_lazy=follow_lazy, count_lazy=count_lazy)
    assert "kubernetes" in {m.split(".")[0] for m in modules}
    assert not providers("kubernetes") & extra_requirements(None)
    assert "optuna" not in {m.split(".")[0] for m in modules}, "the collector stays free of Optuna"


def test_the_collector_validates_and_connects_without_optuna_numpy_scipy() -> None:
    # what the collector image does through the pruning backend, with the suggestion's heavy
    # dependencies made unimportable (its extra does not install them)
    code = """
import sys
HEAVY = {"optuna", "numpy", "scipy", "sqlalchemy", "cmaes"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
from katib_progress.cli import _pruning_backend
from katib_progress.core.errors import ConfigError
from katib_progress.core.pruning import PruningSpec
backend = _pruning_backend()
backend.validate(PruningSpec("loss", "minimize", {"policy": "medianstop"}))
try:
    backend.validate(PruningSpec("loss", "minimize", {"policy": "no-such-policy"}))
except ConfigError:
    pass
else:
    raise SystemExit("an invalid spec passed")
backend.connect("127.0.0.1:1", 1.0).close()
try:
    backend.engine(PruningSpec("loss"))
except ModuleNotFoundError as exc:
    print("engine needs", exc.name)
"""
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:2] == ["engine", "needs"]


# -- the one-line message --------------------------------------------------------------------------


def test_extras_follow_self_references() -> None:
    lines = requires_dist()
    assert extras.requirements("earlystopping", lines) == (
        extras.requirements("collector", lines) | extras.requirements("suggestion", lines)
    )
    assert "optuna" in extras.requirements("all", lines) and "kubernetes" in extras.requirements("all", lines)
    assert "optuna" not in extras.requirements("collector", lines)


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["collector", "run", "--db-manager=x:1"], ["collector"]),
        (["collector", "run", "--db-manager=x:1", "--watchdog"], ["collector", "suggestion"]),
        (["suggestion", "serve"], ["suggestion"]),
        (["early-stopping", "serve"], ["earlystopping"]),
        (["earlystopping", "serve"], ["earlystopping"]),
        (["katib-config", "merge"], []),
    ],
)
def test_each_command_names_its_extra(argv: list[str], wanted: list[str]) -> None:
    assert extras.needed(build_parser().parse_args(argv)) == wanted


def test_a_missing_extra_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(extras, "_installed", lambda name: name not in ("optuna", "scipy"))
    assert main(["suggestion", "serve", "--address", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert "'suggestion' extra" in err and "optuna, scipy" in err and "katib-progress[suggestion]" in err


def test_a_module_missing_at_run_time_is_one_line() -> None:
    exc = ModuleNotFoundError("No module named 'kubernetes'", name="kubernetes.client")
    message = extras.missing_module_message(exc, ["collector"])
    assert message == (
        "katib-progress: the Python package 'kubernetes' is not installed: "
        "pip install 'katib-progress[collector]'"
    )
    ours = ModuleNotFoundError("No module named 'katib_progress.x'", name="katib_progress.x")
    assert extras.missing_module_message(ours, ["collector"]) is None
