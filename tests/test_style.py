"""Style and layering by the ecosystem's tools, configured in pyproject.toml: ruff (pycodestyle, pyflakes, bugbear,
imports at the top unless a lazy optional dependency says why, no private name across modules, records read and
written by core/record.py only) and import-linter (core under the PyTorch face under the jobs and the test harness,
no job importing another, report over them all). And the one rule no linter knows: every job runs from the
command line's job table, and reports through one loop."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff is not installed (the H200 machine's python)")
def test_ruff_finds_nothing():
    result = _run(sys.executable, "-m", "ruff", "check", "elu_study", "tests", "scripts")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("lint-imports") is None, reason="import-linter is not installed")
def test_import_contracts_hold():
    result = _run(shutil.which("lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_job_runs_from_the_job_table_and_reports_through_one_loop():
    from elu_study.__main__ import JOBS
    from elu_study.jobs import report

    for job, module in JOBS.items():
        assert module == f"elu_study.jobs.{job}", job
        assert (ROOT / "elu_study" / "jobs" / job).is_dir() or (ROOT / "elu_study" / "jobs" / f"{job}.py").is_file()
    assert set(report.REPORTS) <= set(JOBS)
    for job, module in report.REPORTS.items():
        assert callable(module.write_report), job
