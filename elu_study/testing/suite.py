"""The GPU test suite's settings and its record.

Settings: how many examples hypothesis draws per fuzz test and over which builds, and the seed
it draws them with (``tests/conftest.py`` reads them from the command line or the environment).
Record: after a test run on a GPU, ``results/<gpu>-tests.json`` says when and on what the suite
last ran, what passed, the sanitizer's verdicts and the seed that reproduces the fuzzing.
"""

from __future__ import annotations

import datetime as dt
import os
import secrets
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from elu_study.core import record

DEFAULT_FUZZ_EXAMPLES = 60  # per fuzz test: every kernel file fuzzes in well under a minute on an H200
EXAMPLES_ENV = "ELU_FUZZ_EXAMPLES"
SEED_ENV = "ELU_FUZZ_SEED"
BUILDS_ENV = "ELU_FUZZ_BUILDS"
BUILD_SETS = ("files", "all")  # one default build per kernel file, or every build the study compiles
GPU_TEST_FILES = ("tests/test_gpu.py",)  # GPU tests without the marker; the fuzz and sanitizer ones carry it
GPU_MARKER = "gpu"
SANITIZE_PROPERTY = "elu_sanitize"  # the user property the sanitizer test attaches its report under
OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


@dataclass(frozen=True)
class FuzzSettings:
    examples: int  # hypothesis max_examples per fuzz test
    seed: int | str  # the seed every fuzz test derives its own from
    builds: str  # "files" or "all"
    seed_source: str  # where the seed came from: --hypothesis-seed, $ELU_FUZZ_SEED or random

    def to_dict(self) -> dict:
        return {"examples_per_test": self.examples, "hypothesis_seed": self.seed, "seed_source": self.seed_source,
                "builds": self.builds,
                "rerun_with": f"--hypothesis-seed={self.seed} --fuzz-examples={self.examples} --fuzz-builds={self.builds}"}


def fuzz_settings(examples: int | None = None, seed: str | int | None = None, builds: str | None = None,
                  environ=os.environ) -> FuzzSettings:
    """Command-line values first, then the environment, then the defaults (a fresh random seed).

    More examples than the default also fuzz every build, unless the build set is given.
    """
    if examples is None:
        examples = int(environ.get(EXAMPLES_ENV) or DEFAULT_FUZZ_EXAMPLES)
    if examples < 1:
        raise ValueError(f"the fuzz budget must be at least 1 example per test, got {examples}")
    if seed is not None:
        source = "--hypothesis-seed"
    elif environ.get(SEED_ENV):
        seed, source = environ[SEED_ENV], f"${SEED_ENV}"
    else:
        seed, source = secrets.randbits(32), "random"
    try:
        seed = int(seed)
    except ValueError:
        pass  # hypothesis takes any hashable seed
    builds = builds or environ.get(BUILDS_ENV) or ("all" if examples > DEFAULT_FUZZ_EXAMPLES else "files")
    if builds not in BUILD_SETS:
        raise ValueError(f"fuzz builds must be one of {BUILD_SETS}, got {builds!r}")
    return FuzzSettings(examples, seed, builds, source)


SETTINGS_KEY = pytest.StashKey[FuzzSettings]()  # where a run's FuzzSettings live in pytest's config.stash


def settings_from_config(config) -> FuzzSettings:
    """The run's FuzzSettings, from pytest's options (tests/conftest.py adds them), made once per run."""
    if SETTINGS_KEY not in config.stash:
        config.stash[SETTINGS_KEY] = fuzz_settings(config.getoption("fuzz_examples", default=None),
                                                   config.getoption("hypothesis_seed", default=None),
                                                   config.getoption("fuzz_builds", default=None))
    return config.stash[SETTINGS_KEY]


def _skip_reason(report) -> str | None:
    longrepr = getattr(report, "longrepr", None)
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return None


def summarize(stats: dict[str, list], exitstatus: int) -> dict:
    """Counts (overall and per file), the failures by id, and why tests were skipped, from pytest's
    terminal-reporter stats (outcome -> reports)."""
    counts = {outcome: len(stats.get(outcome, [])) for outcome in OUTCOMES}
    per_file: dict[str, Counter] = {}
    for outcome in OUTCOMES:
        for report in stats.get(outcome, []):
            path = getattr(report, "nodeid", "").split("::")[0]
            per_file.setdefault(path, Counter())[outcome] += 1
    skips = Counter(reason for r in stats.get("skipped", []) if (reason := _skip_reason(r)))
    return {
        "exit_status": int(exitstatus),
        "passed": counts["failed"] == 0 and counts["error"] == 0 and int(exitstatus) == 0,
        "counts": counts,
        "per_file": {path: dict(c) for path, c in sorted(per_file.items())},
        "failures": sorted(r.nodeid for o in ("failed", "error") for r in stats.get(o, [])),
        "skip_reasons": dict(skips.most_common()),
    }


def is_gpu_test(report) -> bool:
    return (getattr(report, "nodeid", "").split("::")[0] in GPU_TEST_FILES
            or GPU_MARKER in getattr(report, "keywords", {}))


def ran_on_gpu(stats: dict[str, list]) -> bool:
    """Whether any GPU test was run rather than skipped: only such a run is worth a record."""
    return any(is_gpu_test(r) for outcome in ("passed", "failed") for r in stats.get(outcome, []))


def sanitize_verdicts(stats: dict[str, list]) -> dict | None:
    """The sanitizer's per-build, per-tool verdicts, if the sanitizer test ran and attached them."""
    for outcome in ("passed", "failed"):
        for report in stats.get(outcome, []):
            for name, value in getattr(report, "user_properties", ()):
                if name == SANITIZE_PROPERTY:
                    return value
    return None


def run_record(stats: dict[str, list], exitstatus: int, fuzz: FuzzSettings, provenance: dict, args: list[str],
               duration_s: float | None = None) -> dict:
    """The record of a test run (job "tests"): when, the command, the outcome, the fuzzing and the provenance."""
    return {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "command": "python -m pytest " + " ".join(args),
        "duration_s": None if duration_s is None else round(duration_s, 1),
        **summarize(stats, exitstatus),
        "fuzz": fuzz.to_dict(),
        "sanitizer": sanitize_verdicts(stats),
        "provenance": provenance,
    }


def write_record(stats: dict[str, list], exitstatus: int, fuzz: FuzzSettings, args: list[str],
                 results_dir: Path | None, gpu_available: Callable[[], bool], provenance: Callable[[], dict],
                 duration_s: float | None = None) -> Path | None:
    """Save the run's record, results/<gpu>-tests.json (``results_dir`` None: the repository's results/), if
    GPU tests ran on a GPU here; else write nothing (a CPU run, CI's, leaves the tree as it was).
    Returns the path written, or None."""
    if not ran_on_gpu(stats) or not gpu_available():
        return None
    return record.save(run_record(stats, exitstatus, fuzz, provenance(), args, duration_s), "tests", results_dir)
