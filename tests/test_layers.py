"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and they catch what they forbid.

Layers run one way: aidc_env -> oracle -> agents -> experiments -> train.py, evaluate.py; no import circle
between the modules of a package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("aidc_env", "oracle", "agents", "experiments")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")  # import-linter's console script (dev extra)


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_import_contracts_are_kept():
    run = lint_imports(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 3 kept, 0 broken." in run.stdout


@pytest.mark.parametrize("module, line, broken", [
    ("oracle/data.py", "import agents.policies", "oracle is not allowed to import agents"),
    ("aidc_env/simulator.py", "from oracle import solve", "aidc_env is not allowed to import oracle"),
    ("agents/days.py", "import experiments.plots", "agents is not allowed to import experiments"),
    ("experiments/plots.py", "import evaluate", "experiments is not allowed to import evaluate"),
    ("aidc_env/modes/estimate.py", "import aidc_env.case", "No cycles are allowed in aidc_env"),
    ("aidc_env/modes/params.py", "from aidc_env.modes import enumeration", "No cycles are allowed in aidc_env.modes"),
])
def test_a_forbidden_import_breaks_a_contract(tmp_path, module, line, broken):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}  # forbidden\n")
    run = lint_imports(tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    assert broken in run.stdout
