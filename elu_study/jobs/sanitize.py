"""compute-sanitizer over every build: ``python -m elu_study sanitize`` (or ``python -m elu_study.sanitize``).

Each tool (memcheck, racecheck, initcheck, synccheck) runs once over a child Python process that
loads every build and calls each of its ops (``elu_study.ops``) on small inputs: lengths around
vector and block boundaries, misaligned input and output views, in place, non-contiguous input,
and one input past a grid-stride launch's first pass. The child allocates without PyTorch's caching
allocator, every tensor its own ``cudaMalloc`` of exactly its size, and puts every output's last
element at the end of its allocation, so that memcheck sees a write past the end and initcheck a read
of an element never written. Inputs are made on the host and results checked there, against PyTorch:
the only kernels the tools watch are the builds' own (and the copy of a strided input), so nothing
of PyTorch's can put an error in the report.

racecheck runs on every build, not only those whose resource report shows shared memory: dynamic
shared memory does not show there, and a kernel without any costs racecheck nothing.

The tools run side by side, over all builds at once; a run with errors is repeated build by build to
say which build has them. 0 errors everywhere is the verdict; it is written, with the provenance, to
``results/<gpu>-sanitize.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from elu_study.core.paths import REPO_ROOT

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ERROR_EXITCODE = 86  # what compute-sanitizer returns when it found errors (the child's own failures exit 1)
CHILD_OK = "elu-study sanitize child: done"
DEFAULT_CUDA_HOMES = ("/usr/local/cuda",)
# Lengths around every vector (4) and block (256, 512, 1024 elements) boundary a step has, and the
# smallest: each with its last element at the end of an allocation.
SMALL_LENGTHS = (0, 1, 2, 3, 4, 5, 7, 8, 255, 257, 1023, 1025, 3 * 4096 + 1)
LARGE_LENGTH = (1 << 22) + 5  # past one pass of the seed's grid-stride launch (1152 x 512 x 4 elements)
CHILD_ENV = {
    # Every tensor its own cudaMalloc of exactly its size, so that the tools see each tensor's bounds
    # (inside a cached block, a write past a tensor's end lands in memory that is allocated).
    "PYTORCH_NO_CUDA_MEMORY_CACHING": "1",
    "PYTHONUNBUFFERED": "1",
}
_ERROR_SUMMARY = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_HEADLINE = re.compile(r"^=+ +((?:Invalid|Uninitialized|Race reported|Barrier error|Program hit|Target application"
                       r"|Error|Warning|Potential).*)$", re.MULTILINE)
_RACECHECK_SUMMARY = re.compile(
    r"RACECHECK SUMMARY:\s*(\d+)\s+hazards?\s+displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")


# ---------------------------------------------------------------- finding the tool, reading its output


def find_compute_sanitizer() -> str:
    """compute-sanitizer from PATH, $CUDA_HOME, /usr/local/cuda, or an nvidia-cuda-sanitizer-api wheel."""
    from elu_study.core.build import configure_toolchain

    configure_toolchain()
    candidates = []
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), *DEFAULT_CUDA_HOMES):
        if home:
            candidates += [Path(home, "bin", "compute-sanitizer"), Path(home, "compute-sanitizer", "compute-sanitizer")]
    candidates += _wheel_candidates()
    found = shutil.which("compute-sanitizer") or next(
        (str(p) for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)
    if found is None:
        raise FileNotFoundError(
            "compute-sanitizer not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin: it ships with the "
            "CUDA toolkit (or pip's nvidia-cuda-sanitizer-api); put it on PATH or set CUDA_HOME")
    return found


def _wheel_candidates() -> list[Path]:
    try:
        import nvidia  # pip's nvidia-cuda-sanitizer-api installs into this namespace
    except ImportError:
        return []
    found = []
    for base in nvidia.__path__:
        for pattern in ("*/compute-sanitizer/compute-sanitizer", "*/bin/compute-sanitizer",
                        "*/*/compute-sanitizer/compute-sanitizer", "*/*/bin/compute-sanitizer"):
            found += sorted(Path(base).glob(pattern))
    return found


def sanitizer_version(exe: str) -> str | None:
    try:
        text = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"Version\s+(\S+)", text)
    return match.group(1) if match else (text.strip().splitlines() or [None])[-1]


class NoGpu(RuntimeError):
    """The sanitizer has nothing to run on."""


@dataclass(frozen=True)
class Summary:
    errors: int | None  # None: the tool printed no summary (it, or the run, did not finish)
    warnings: int = 0  # racecheck's hazards of warning severity


def parse_summary(text: str) -> Summary:
    """The error count from a compute-sanitizer run's output: its ``ERROR SUMMARY: N errors`` lines
    (racecheck: ``RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)``); the largest if
    several, None if there is none."""
    counts = [int(n) for n in _ERROR_SUMMARY.findall(text)]
    warnings = 0
    for _, errors, warns in _RACECHECK_SUMMARY.findall(text):
        counts.append(int(errors))
        warnings = max(warnings, int(warns))
    return Summary(max(counts) if counts else None, warnings)


def headlines(text: str, limit: int = 10) -> list[str]:
    """The distinct first lines of the tool's reports (``Invalid __global__ write of size 4 bytes``, ...)."""
    return list(dict.fromkeys(m.strip() for m in _HEADLINE.findall(text)))[:limit]


# Checks that newer releases have and that later steps need, each passed where the tool lists it in --help:
# the bulk tensor copies (TMA) of Hopper for memcheck, and shared memory as well as global for initcheck.
OPTIONAL_CHECKS = {
    "memcheck": (("--check-tensor-ops", "yes"),),
    "initcheck": (("--initcheck-address-space", "all"),),
}


def supported_options(exe: str) -> frozenset[str]:
    """The ``--options`` this compute-sanitizer's ``--help`` lists."""
    try:
        text = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return frozenset()
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))


def sanitizer_command(exe: str, tool: str, child: list[str], supported: frozenset[str] = frozenset()) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; known: {', '.join(TOOLS)}")
    extra = [part for option, value in OPTIONAL_CHECKS.get(tool, ()) if option in supported for part in (option, value)]
    return [
        exe, "--tool", tool,
        "--error-exitcode", str(ERROR_EXITCODE),
        "--target-processes", "application-only",
        "--launch-timeout", "600",  # importing torch in a loaded machine takes a while
        "--print-limit", "50",
        *extra,
        *child,
    ]


# ---------------------------------------------------------------- which builds


@dataclass(frozen=True)
class Build:
    id: str
    variant: str
    flags: tuple[str, ...] = ()
    computes_elu: bool = True  # False: a copy kernel, whose results are read but not compared with ELU


def _build(variant: str, flags=()) -> Build:
    from elu_study.testing.suite import build_id, computes_elu

    if str(variant).endswith(".cu"):
        return Build(build_id(Path(variant).name, tuple(flags)), str(variant), tuple(flags))
    return Build(build_id(variant, tuple(flags)), str(variant), tuple(flags), computes_elu(variant, flags))


def select_builds(names: list[str] | None = None, which: str = "all") -> list[Build]:
    """The builds named (a step's name, number or label: all its builds; or a .cu file), else every
    build of the study ("all") or one default build per kernel file ("files")."""
    from elu_study.core.build import resolve_variant
    from elu_study.testing.suite import fuzz_builds

    every = fuzz_builds("all")
    if not names:
        return [_build(v, f) for v, f in fuzz_builds(which)]
    chosen: list[Build] = []
    for name in names:
        if str(name).endswith(".cu"):
            chosen.append(_build(str(resolve_variant(name))))
            continue
        stem = resolve_variant(name).stem  # raises ValueError listing the known steps
        matching = [_build(v, f) for v, f in every if v == stem] or [_build(stem)]
        chosen += [b for b in matching if b not in chosen]
    return chosen


# ---------------------------------------------------------------- the runs


@dataclass
class Run:
    tool: str
    builds: list[str]  # build ids
    returncode: int
    errors: int | None
    warnings: int
    child_ok: bool  # the child ran every call and every result was right
    seconds: float
    findings: list[str] = field(default_factory=list)  # the distinct headlines of the tool's reports
    log_tail: str = ""  # the end of the output, kept where the run failed

    @property
    def ok(self) -> bool:
        return self.errors == 0 and self.child_ok and self.returncode == 0


Runner = Callable[[str, list[Build]], tuple[int, str, float]]  # (tool, builds) -> (returncode, output, seconds)


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def run_one(runner: Runner, tool: str, builds: list[Build]) -> Run:
    returncode, output, seconds = runner(tool, builds)
    summary = parse_summary(output)
    run = Run(tool, [b.id for b in builds], returncode, summary.errors, summary.warnings, CHILD_OK in output, seconds,
              headlines(output))
    if not run.ok:
        run.log_tail = _tail(output)
    return run


def sanitize(builds: list[Build], tools, runner: Runner, workers: int = 4,
             per_build: bool = False, progress: bool = True) -> list[Run]:
    """Every tool over every build, side by side; a failed group run is repeated build by build."""
    tasks = [(tool, [b]) for tool in tools for b in builds] if per_build else [(tool, builds) for tool in tools]
    runs = _map(runner, tasks, workers, progress, "sanitizing")
    retry = [(r.tool, [b]) for r in runs if not r.ok and len(r.builds) > 1 for b in builds if b.id in r.builds]
    if retry:
        runs += _map(runner, retry, workers, progress, "finding the build")
    return runs


def _map(runner: Runner, tasks, workers: int, progress: bool, desc: str) -> list[Run]:
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(tasks)))) as pool:
        futures = [pool.submit(run_one, runner, tool, builds) for tool, builds in tasks]
        if progress:
            from tqdm.auto import tqdm

            for future in tqdm(futures, desc=desc, unit="run"):
                future.result()
        return [f.result() for f in futures]


def verdicts(builds: list[Build], runs: list[Run]) -> dict[str, dict[str, dict]]:
    """build id -> tool -> {"errors", "ok"}: from the build's own run where there is one, else its group's."""
    table: dict[str, dict[str, dict]] = {}
    for b in builds:
        for tool in dict.fromkeys(r.tool for r in runs):
            mine = [r for r in runs if r.tool == tool and r.builds == [b.id]]
            group = [r for r in runs if r.tool == tool and b.id in r.builds and len(r.builds) > 1]
            run = (mine or group or [None])[0]
            if run is not None:
                table.setdefault(b.id, {})[tool] = {"errors": run.errors, "ok": run.ok}
    return table


def report(builds: list[Build], runs: list[Run], version: str | None, provenance: dict | None) -> dict:
    return {
        "passed": bool(runs) and all(r.ok for r in runs),
        "compute_sanitizer": version,
        "tools": list(dict.fromkeys(r.tool for r in runs)),
        "builds": verdicts(builds, runs),
        "runs": [asdict(r) | {"ok": r.ok} for r in runs],
        "provenance": provenance,
    }


def brief(rep: dict) -> dict:
    """What the test record keeps of a report: the verdict, and the error count of each build and tool."""
    return {
        "passed": rep["passed"],
        "compute_sanitizer": rep["compute_sanitizer"],
        "errors": {b: {t: v["errors"] for t, v in tools.items()} for b, tools in rep["builds"].items()},
    }


def describe(rep: dict) -> str:
    tools = rep["tools"]
    width = max([len(b) for b in rep["builds"]] + [5])
    lines = [f"{'build':<{width}}  " + "  ".join(f"{t:>9}" for t in tools)]
    for b, row in rep["builds"].items():
        cells = []
        for t in tools:
            v = row.get(t)
            cells.append(f"{'-' if v is None else ('?' if v['errors'] is None else v['errors']):>9}"
                         + ("" if v is None or v["ok"] else "!"))
        lines.append(f"{b:<{width}}  " + "  ".join(cells))
    lines.append("errors per build and tool ('!': the run failed; '?': no summary). "
                 + ("PASS: 0 errors" if rep["passed"] else "FAIL"))
    for r in rep["runs"]:
        if not r["ok"]:
            lines.append(f"\n--- {r['tool']} over {', '.join(r['builds'])}: exit {r['returncode']}, "
                         f"errors {r['errors']}, child {'ok' if r['child_ok'] else 'did not finish'}\n"
                         + "".join(f"  {h}\n" for h in r["findings"]) + r["log_tail"])
    return "\n".join(lines)


def save(rep: dict, results_dir: Path | None = None) -> Path:
    from elu_study.core.hardware import slug
    from elu_study.core.record import RESULTS_DIR

    path = Path(results_dir or RESULTS_DIR) / f"{slug(rep['provenance']['gpu'])}-sanitize.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rep, indent=1) + "\n")
    return path


# ---------------------------------------------------------------- the child's side, and starting it


def subprocess_runner(exe: str, libraries: dict[str, dict], timeout_s: float = 3600) -> Runner:
    """Run the child under compute-sanitizer: it compiles nothing, it loads each build's library
    (``libraries``: build id -> ``library_entry``)."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **CHILD_ENV, "PYTHONPATH": path}
    supported = supported_options(exe)

    def run(tool: str, builds: list[Build]) -> tuple[int, str, float]:
        with tempfile.TemporaryDirectory(prefix="elu-sanitize-") as tmp:
            spec = Path(tmp, "builds.json")
            spec.write_text(json.dumps({"builds": [libraries[b.id] for b in builds]}))
            cmd = sanitizer_command(exe, tool, [sys.executable, "-m", "elu_study.jobs.sanitize", "--child", str(spec)], supported)
            start = time.perf_counter()
            try:
                done = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=timeout_s)
                return done.returncode, done.stdout + done.stderr, time.perf_counter() - start
            except subprocess.TimeoutExpired as err:
                out = (err.stdout or b"").decode(errors="replace") if isinstance(err.stdout, bytes) else (err.stdout or "")
                return -1, out + f"\n(timed out after {timeout_s:.0f} s)", time.perf_counter() - start

    return run


def library_entry(b: Build) -> dict:
    """What the child needs to load a build: its module name and shared library (compiled here if need be)."""
    from elu_study.core.build import compile_variant

    module = compile_variant(b.variant, extra_cuda_cflags=list(b.flags))
    return {"id": b.id, "module": module.__name__, "library": module.__file__, "computes_elu": b.computes_elu}


def _load_library(name: str, path: str):
    import importlib.machinery
    import importlib.util

    import torch  # noqa: F401 - the extension links against libtorch

    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_OMITTED = object()


def exercise(fn, op, device, compare: bool = True) -> int:
    """Call one op on the small inputs; check every result against PyTorch. Returns the number of calls.

    Inputs are made on the host and copied over, and results are copied back and checked on the host,
    so that the only kernels the tools watch are the op's own (and the binding's copy of a strided
    input): nothing of PyTorch's can put an error in the report. ``compare=False`` (a copy kernel)
    still copies every result back, reading every element."""
    import torch

    from elu_study.core.check import ATOL, RTOL

    gen = torch.Generator().manual_seed(0)
    calls = 0

    def tensor(n: int, offset: int = 0):  # n values ending at the end of their allocation, offset elements in
        return torch.randn(n + offset, generator=gen).mul_(4).to(device)[offset:]

    def call(inputs, alpha, out=_OMITTED):
        nonlocal calls
        expected = op.expected([x.detach().cpu().clone() for x in inputs], alpha)
        result = fn(*inputs, alpha) if out is _OMITTED else fn(*inputs, alpha, out=out)
        got = result.cpu()  # reads every element: initcheck sees one never written
        if tuple(got.shape) != tuple(expected.shape):
            raise AssertionError(f"{op.name}: result of shape {tuple(got.shape)} for inputs of {tuple(expected.shape)}")
        if compare and not torch.isclose(got, expected, rtol=RTOL, atol=ATOL, equal_nan=True).all():
            raise AssertionError(f"{op.name}: wrong result for shape {tuple(expected.shape)}, alpha {alpha}")
        calls += 1

    k = len(op.inputs)
    for i, n in enumerate(SMALL_LENGTHS):
        alpha = (1.0, -0.5, 0.0, 1.7)[i % 4]
        call([tensor(n) for _ in range(k)], alpha)  # out allocated by the binding
        call([tensor(n) for _ in range(k)], alpha, out=torch.empty(n, device=device))  # exact, never written before
        for x_off, out_off in ((1, 0), (0, 3), (2, 2)):  # misaligned input, output, both
            call([tensor(n, x_off) for _ in range(k)], alpha, out=torch.empty(n + out_off, device=device)[out_off:])
        if op.in_place is not None:
            for off in (0, 1):
                inputs = [tensor(n, off) for _ in range(k)]
                call(inputs, alpha, out=inputs[op.in_place])
        strided = [tensor(2 * n)[::2] for _ in range(k)]  # the binding copies it to contiguous
        call(strided, alpha, out=torch.empty(n, device=device))
    call([tensor(LARGE_LENGTH) for _ in range(k)], 1.0, out=torch.empty(LARGE_LENGTH, device=device))
    if op.in_place is not None:
        inputs = [tensor(LARGE_LENGTH, 1) for _ in range(k)]
        call(inputs, 1.0, out=inputs[op.in_place])
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return calls


def child(spec_path: str) -> int:
    import torch

    from elu_study.core.ops import ops_of

    spec = json.loads(Path(spec_path).read_text())
    device = torch.device("cuda", torch.cuda.current_device())
    total = 0
    for entry in spec["builds"]:
        module = _load_library(entry["module"], entry["library"])
        ops = ops_of(module)
        if not ops:
            raise RuntimeError(f"{entry['id']}: the module registers none of the ops elu_study.ops knows")
        for op in ops:
            # A copy kernel's elu is not ELU; its build's elu_backward (kernels/common/backward.cu) is the real one.
            compare = entry.get("computes_elu", True) or op.name != "elu"
            total += exercise(getattr(module, op.name), op, device, compare)
        print(f"elu-study sanitize child: {entry['id']} ok", flush=True)
    print(f"{CHILD_OK}: {total} calls over {len(spec['builds'])} build(s)", flush=True)
    return 0


# ---------------------------------------------------------------- the command


def run(names: list[str] | None = None, *, which: str = "all", tools=TOOLS, jobs: int | None = None,
        per_build: bool = False, progress: bool = True, extra_builds: list[Build] = ()) -> dict:
    """Compile the builds, run every tool over them, and return the report (see ``report``)."""
    import torch

    from elu_study.core.hardware import provenance
    from elu_study.testing.suite import compile_all

    exe = find_compute_sanitizer()
    if not torch.cuda.is_available():
        raise NoGpu("compute-sanitizer needs a CUDA GPU, and torch sees none")
    builds = [*select_builds(names, which), *extra_builds]
    compile_all([(b.variant, b.flags) for b in builds], workers=jobs)
    libraries = {b.id: library_entry(b) for b in builds}  # from the disk cache, before any thread starts
    runs = sanitize(builds, tools, subprocess_runner(exe, libraries), workers=max(4, len(tools)),
                    per_build=per_build, progress=progress)
    return report(builds, runs, sanitizer_version(exe), provenance())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elu_study sanitize",
        description="compute-sanitizer (memcheck, racecheck, initcheck, synccheck) over a small-input run of every "
                    "build; 0 errors required. Writes results/<gpu>-sanitize.json.")
    parser.add_argument("builds", nargs="*", help="steps (name, number or label: all their builds) or .cu files; "
                                                   "default: every build of the study")
    parser.add_argument("--files", action="store_true", help="one default build per kernel file, not every build")
    parser.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, from {','.join(TOOLS)}")
    parser.add_argument("--jobs", type=int, default=None, help="parallel builds (default: half the cores)")
    parser.add_argument("--per-build", action="store_true", help="one run per build and tool (slower; exact attribution)")
    parser.add_argument("--no-record", action="store_true", help="do not write results/<gpu>-sanitize.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    unknown = sorted(set(tools) - set(TOOLS))
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    try:
        rep = run(args.builds, which="files" if args.files else "all", tools=tools, jobs=args.jobs,
                  per_build=args.per_build)
    except (FileNotFoundError, NoGpu) as err:
        print(f"elu-study sanitize: {err}", file=sys.stderr)
        return 2
    print(describe(rep))
    if not args.no_record:
        print(f"\nwrote {save(rep)}")
    return 0 if rep["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
