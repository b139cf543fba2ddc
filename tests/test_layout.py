"""The package's layout is its architecture: these tests hold the rules that keep it readable.

- core/ (build, hardware, timing, checks, SASS, entries, the harness, ncu, the one record module)
  imports no job; pytorch/ (the torch.library ops and nn modules) imports only core; testing/ (the
  pytest harness and fuzzing) imports core and pytorch; each job under jobs/ imports core and
  pytorch only, never another job; jobs/report is the one loop over every job's write_report.
- At most 5 layers, drawn by imports between these parts; no import cycle between modules.
- Modules under 400 lines, functions under 60; imports at the top of a module, except an
  optional dependency kept lazy with a comment saying why; no private name crosses modules.
- Records are read and written in one place (core/record.py).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "elu_study"
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_LAYERS = 5
# Imports that may stay inside a function, each for the reason its line's comment gives.
LAZY_ALLOWED = {"triton", "triton.testing", "pynvml", "nbformat", "nbclient", "nvidia", "torch.utils",
                "elu_study.core.triton_elu", "elu_study.pytorch.nn", "timm", "pandas", "torch.utils.benchmark",
                "torch._dynamo.utils"}
# Names that only core/record.py may define: the record's path, save, load and the README-block writer.
RECORD_IO = {"record_path", "save", "load", "dumps", "write_block", "update_readme", "save_figure", "open_record"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def tree(name: str) -> ast.Module:
    return ast.parse(MODULES[name].read_text())


def imported(name: str, node: ast.AST) -> list[str]:
    """The package modules an import statement names (a ``from X import y`` names X.y if it is a module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in MODULES else target for a in node.names]


@functools.cache
def package_imports(name: str) -> frozenset[str]:
    out = set()
    for node in ast.walk(tree(name)):
        for target in imported(name, node):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                out.add(target)
    return frozenset(out)


def part(name: str) -> str:
    """The architectural part a module belongs to."""
    parts = name.split(".")
    if len(parts) == 1:
        return "api"
    if parts[1] in ("core", "pytorch", "testing", "__main__"):
        return parts[1]
    if parts[1] == "jobs":
        return "jobs" if len(parts) == 2 else "report" if parts[2] == "report" else f"job:{parts[2]}"
    raise AssertionError(f"{name} lies outside core/, pytorch/, testing/ and jobs/")


def allowed(source: str, target: str) -> bool:
    if target == source or target in ("core", "jobs"):
        return True
    rules = {"core": set(), "pytorch": {"core"}, "testing": {"core", "pytorch"}, "api": {"core", "pytorch"},
             "__main__": set()}
    if source.startswith("job:"):
        return target == "pytorch"
    if source == "report":
        return target.startswith("job:")
    return target in rules[source]


def test_every_module_lies_in_a_part():
    assert {part(m) for m in MODULES} >= {"core", "pytorch", "testing", "report", "job:study", "job:sizes"}


def test_parts_import_only_downward():
    wrong = [f"{m} ({part(m)}) imports {t} ({part(t)})" for m in MODULES for t in package_imports(m)
             if not allowed(part(m), part(t))]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycle_between_modules():
    state: dict[str, int] = {}

    def visit(m, stack):
        if state.get(m) == 1:
            raise AssertionError("cycle: " + " -> ".join(stack[stack.index(m):] + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for t in package_imports(m):
            visit(t, stack + [m])
        state[m] = 2

    for m in MODULES:
        visit(m, [])


def layers() -> dict[str, int]:
    """Each part's depth: 1 for a part that imports no other, else one more than the deepest it imports.
    ``python -m elu_study`` reaches the jobs through importlib (its job table), one layer above report."""
    edges: dict[str, set[str]] = {}
    for m in MODULES:
        edges.setdefault(part(m), set()).update(part(t) for t in package_imports(m) if part(t) != part(m))
    edges["__main__"] |= {p for p in edges if p.startswith("job:") or p == "report"}

    @functools.cache
    def depth(p):
        return 1 + max((depth(t) for t in edges[p] if t != "jobs"), default=0)

    return {p: depth(p) for p in edges}


def test_at_most_five_layers():
    deepest = max(layers().items(), key=lambda kv: kv[1])
    assert deepest[1] <= MAX_LAYERS, layers()
    assert layers()["core"] == 1


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_and_function_sizes(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines < MAX_MODULE_LINES, f"{name}: {lines} lines"
    long = [f"{n.name}: {n.end_lineno - n.lineno + 1} lines" for n in ast.walk(tree(name))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{name}: {long}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_at_the_top_unless_an_optional_dependency_says_why(name):
    source = MODULES[name].read_text().splitlines()
    inner = []
    for fn in ast.walk(tree(name)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = imported(name, node)
                ok = all(t in LAZY_ALLOWED for t in targets) and "#" in source[node.lineno - 1]
                if not ok:
                    inner.append(f"line {node.lineno}: {source[node.lineno - 1].strip()}")
    assert not inner, f"{name}: imports inside functions:\n" + "\n".join(inner)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_private_name_crosses_modules(name):
    private = [f"{a.name} from {node.module}" for node in ast.walk(tree(name)) if isinstance(node, ast.ImportFrom)
               and (node.module or "").startswith("elu_study") for a in node.names if a.name.startswith("_")]
    assert not private, f"{name} imports private names: {private}"


def test_record_io_is_defined_once():
    others = [f"{m}.{n.name}" for m in MODULES if m != "elu_study.core.record" for n in tree(m).body
              if isinstance(n, ast.FunctionDef) and n.name in RECORD_IO]
    assert not others, f"record I/O defined outside core/record.py: {others}"


def test_every_job_runs_from_the_job_table_and_reports_through_one_loop():
    from elu_study.__main__ import JOBS
    from elu_study.jobs import report

    for job, module in JOBS.items():
        assert module == f"elu_study.jobs.{job}" and module in MODULES, job
    assert set(report.REPORTS) <= set(JOBS)
    for job, module in report.REPORTS.items():
        assert callable(module.write_report), job
