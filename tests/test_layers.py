"""The import rule of docs/DEVELOPING.md: one straight dependency line.

    base (katib_progress.core)  <-  collector, suggestion (never each other)  <-  apps

Every ``import`` in the package's three folders is read with ``ast`` (function-level and
``TYPE_CHECKING`` imports included) and checked against the rule; hidden imports through
``importlib.import_module``/``__import__`` are refused outright.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The folders that hold the ``katib_progress`` namespace package (pyproject's hatch settings).
PORTIONS = (ROOT, ROOT / "collector", ROOT / "suggestion")

BASE, COLLECTOR, SUGGESTION, APPS = "base", "collector", "suggestion", "apps"
#: Which of our layers each layer may import.
ALLOWED = {
    BASE: {BASE},
    COLLECTOR: {BASE, COLLECTOR},
    SUGGESTION: {BASE, SUGGESTION},
    APPS: {BASE, COLLECTOR, SUGGESTION, APPS},
}
#: Third-party packages the base must stay free of (Katib, Kubernetes, gRPC, Optuna).
BASE_FORBIDDEN = ("kubeflow", "kubernetes", "grpc", "grpc_health", "optuna")
#: The import names before the project qualified them; nothing may use them any more.
OLD_NAMES = ("collector", "suggestion")


def layer(module: str) -> str | None:
    """The layer of one of our modules, None for anything else."""
    parts = module.split(".")
    if parts[0] != "katib_progress" or len(parts) == 1:
        return None
    return {"core": BASE, "collector": COLLECTOR, "suggestion": SUGGESTION}.get(parts[1], APPS)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def module_name(path: Path, portion: Path) -> str:
    rel = path.relative_to(portion).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:  # ``from katib_progress import collector`` imports a layer too
                yield node.lineno, f"{target}.{alias.name}"


def hidden_imports(tree: ast.AST) -> Iterator[int]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("import_module", "__import__"):
                yield node.lineno


def check_file(path: Path, portion: Path, root: Path) -> list[Violation]:
    module = module_name(path, portion)
    tree = ast.parse(path.read_text(), filename=str(path))
    rel = str(path.relative_to(root))
    own = layer(module)
    found: list[Violation] = []
    if own is None:
        return [Violation(rel, 1, f"{module} is outside the katib_progress package")]
    for line in hidden_imports(tree):
        found.append(Violation(rel, line, "hidden import (importlib/__import__): import it plainly"))
    for line, target in imported_modules(tree, module, path.name == "__init__.py"):
        top = target.split(".")[0]
        if top in OLD_NAMES:
            found.append(Violation(rel, line, f"imports {target}: use katib_progress.{target}"))
        if own == BASE and top in BASE_FORBIDDEN:
            found.append(Violation(rel, line, f"the base layer imports {top}"))
        theirs = layer(target)
        if theirs is not None and theirs not in ALLOWED[own]:
            found.append(Violation(rel, line, f"{own} layer ({module}) imports {theirs} layer ({target})"))
    return found


def check_tree(portions: tuple[Path, ...]) -> list[Violation]:
    """``portions[0]`` is the repository root (it holds the apps and the base)."""
    found: list[Violation] = []
    for portion in portions:
        package = portion / "katib_progress"
        for path in sorted(package.rglob("*.py")):
            if not path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
                found.extend(check_file(path, portion, portions[0]))
    return found


def test_every_import_follows_the_layer_rule() -> None:
    violations = check_tree(PORTIONS)
    assert not violations, "\n".join(map(str, violations))


def test_the_three_folders_hold_the_layers_they_claim() -> None:
    assert (ROOT / "katib_progress" / "core").is_dir()
    assert (ROOT / "collector" / "katib_progress" / "collector" / "__init__.py").is_file()
    assert (ROOT / "suggestion" / "katib_progress" / "suggestion" / "__init__.py").is_file()
    # A namespace package: an __init__.py in any portion would hide the others.
    for portion in PORTIONS:
        assert not (portion / "katib_progress" / "__init__.py").exists(), portion


def test_the_installed_names_are_the_checked_ones() -> None:
    import katib_progress.collector.pipeline
    import katib_progress.core.types
    import katib_progress.suggestion.server

    for module, portion in (
        (katib_progress.core.types, ROOT),
        (katib_progress.collector.pipeline, ROOT / "collector"),
        (katib_progress.suggestion.server, ROOT / "suggestion"),
    ):
        assert Path(module.__file__ or "").resolve().is_relative_to(portion / "katib_progress"), module


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.mark.parametrize(
    ("rel", "source", "expected"),
    [
        ("collector/katib_progress/collector/x.py", "from katib_progress.suggestion import y\n", "imports"),
        ("suggestion/katib_progress/suggestion/x.py", "import katib_progress.local.runner\n", "apps layer"),
        ("katib_progress/core/x.py", "from katib_progress.collector import pipeline\n", "collector layer"),
        ("katib_progress/core/x.py", "import kubernetes\n", "base layer imports kubernetes"),
        ("katib_progress/core/x.py", "def f():\n    from katib_progress import report\n", "apps layer"),
        ("katib_progress/local/x.py", "import importlib\nimportlib.import_module('x')\n", "hidden import"),
        ("katib_progress/local/x.py", "from collector.pipeline import JobRef\n", "use katib_progress."),
        ("collector/katib_progress/collector/x.py", "from ..suggestion import y\n", "suggestion layer"),
    ],
)
def test_the_checker_catches_each_kind_of_violation(
    tmp_path: Path, rel: str, source: str, expected: str
) -> None:
    _write(tmp_path, rel, source)
    portions = (tmp_path, tmp_path / "collector", tmp_path / "suggestion")
    violations = [str(v) for v in check_tree(portions) if v.path == rel]
    assert any(expected in v for v in violations), violations


def test_the_checker_accepts_the_allowed_directions(tmp_path: Path) -> None:
    _write(tmp_path, "collector/katib_progress/collector/x.py", "from katib_progress.core import types\n")
    _write(
        tmp_path, "suggestion/katib_progress/suggestion/x.py", "from katib_progress.core.errors import E\n"
    )
    _write(tmp_path, "katib_progress/local/x.py", "from katib_progress.collector import x\nimport optuna\n")
    _write(tmp_path, "katib_progress/core/y.py", "from katib_progress.core import types\nimport pydantic\n")
    assert check_tree((tmp_path, tmp_path / "collector", tmp_path / "suggestion")) == []


def test_the_wheel_installs_only_the_katib_progress_package() -> None:
    """Every folder the wheel packs installs as ``katib_progress``; no generic top-level name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    hatch = config["tool"]["hatch"]["build"]
    packages = hatch["targets"]["wheel"]["packages"]
    assert {Path(p).name for p in packages} == {"katib_progress"}
    assert {str(p.relative_to(ROOT)) for p in PORTIONS} == {str(Path(p).parent) for p in packages}
    assert sorted(hatch["dev-mode-dirs"]) == sorted(str(Path(p).parent) for p in packages)
