"""Install: every import is declared in pyproject.toml, and CI runs README's set-up and test commands."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
OWN = {"aidc_env", "oracle", "agents", "experiments", "train", "evaluate", "tests"}
RUNTIME_SOURCES = ("aidc_env", "oracle", "agents", "experiments", "train.py", "evaluate.py")
DEV_SOURCES = ("tests", "benchmarks", "scripts")


def normalized(requirement: str) -> str:
    """The distribution name of a requirement string (PEP 503 normalized)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


def imported_top_levels(*sources: str) -> dict[str, str]:
    """Top-level modules imported (absolutely) by the Python files under ``sources``, with one file each."""
    found: dict[str, str] = {}
    for source in sources:
        path = ROOT / source
        for file in [path] if path.is_file() else sorted(path.rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(), filename=str(file))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(file.relative_to(ROOT)))
    return {name: file for name, file in found.items() if name not in OWN and name not in sys.stdlib_module_names}


def undeclared(imports: dict[str, str], declared: set[str]) -> list[str]:
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, file in sorted(imports.items()):
        names = {normalized(dist) for dist in distributions.get(module, [])}
        if not names & declared:
            missing.append(f"{module} (imported by {file}; installed as {sorted(names) or 'nothing'})")
    return missing


RUNTIME = {normalized(r) for r in PYPROJECT["project"]["dependencies"]}
DEV = {normalized(r) for r in PYPROJECT["project"]["optional-dependencies"]["dev"]}
EXTRAS = {normalized(r) for name, extra in PYPROJECT["project"]["optional-dependencies"].items() if name != "dev"
          for r in extra}
"""Optional run-time packages (e.g. ray for --backend ray): imported only when asked for."""


def test_every_runtime_import_is_a_declared_dependency():
    imports = imported_top_levels(*RUNTIME_SOURCES)
    assert {"numpy", "pyomo", "highspy", "torch", "ray"} <= set(imports)  # the scan sees the imports
    assert undeclared(imports, RUNTIME | EXTRAS) == []
    assert EXTRAS <= DEV  # CI installs .[dev]: the tests of the optional backends run there too


def test_every_test_and_tool_import_is_declared():
    imports = imported_top_levels(*DEV_SOURCES)
    assert {"pytest", "hypothesis"} <= set(imports)
    assert undeclared(imports, RUNTIME | DEV) == []


def test_an_undeclared_import_is_caught():
    assert undeclared({"pytest": "x.py"}, RUNTIME) == ["pytest (imported by x.py; installed as ['pytest'])"]


def readme_block(title: str) -> list[str]:
    """The command lines of the fenced block after a README line."""
    text = (ROOT / "README.md").read_text()
    block = re.search(re.escape(title) + r"\s*```bash\n(.*?)```", text, re.S)
    assert block, title
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_ci_runs_the_readme_commands_in_a_fresh_venv():
    (command,) = readme_block("Set up and run the tests:")
    assert command == 'pip install torch==2.13.0 && pip install -e ".[dev]" && python -m pytest -q'
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == command  # last: the script's exit code is pytest's (5 if it collects no test)
    assert "set -euo pipefail" in ci
    assert any(line.startswith("python -m venv ") for line in ci)
    assert os.access(ROOT / ".ci" / "run", os.X_OK)



def test_every_module_imports():
    """A module no test imports (a study script, a benchmark helper) must still import: no stale names."""
    import importlib
    import pkgutil

    for package in ("aidc_env", "oracle", "agents", "experiments"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue  # runs its CLI on import
            importlib.import_module(info.name)
