"""What determines a record, each input with its digest: a record is measured again only when one of them changed.

A record's fingerprint (``record["fingerprint"]``) holds:

- ``code``: each measuring module its job runs (the static import closure of its job's module inside
  ``elu_study``, plus any extra files such as ``tests/``), digested as Python's AST with docstrings removed, so that
  comments, docstrings and formatting change nothing. Presentation (templates, figures, notebook helpers, the
  report) and bookkeeping (how records are stored and fingerprinted, how builds are invoked) are not inputs: the
  builds' own digests below capture what the build code passes to the compiler.
- ``catalogue``: the part of ``catalog.toml`` the job reads (``entries.READS``: its entries and their kernel files'
  tables; the whole catalogue for a job it does not name), as data, each entry's ``what`` (its description) and each
  kernel file's ``sass`` claims left out. A new step voids the records that would measure it, not every record.
- ``builds``: every kernel build its processes loaded (``load_inline``'s sources, the headers they include, the
  flags), from the build log of the run (``ELU_STUDY_BUILD_LOG``).
- ``toolchain``: GPU, driver, CUDA and torch, compared where a GPU runs the plan (a machine without one cannot
  measure, and its torch is not the record's).

``changes(held, now)`` names the inputs that differ; ``python -m elu_study records --plan`` prints them.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import re
import tomllib
from pathlib import Path

from elu_study.core import build, entries
from elu_study.core.paths import REPO_ROOT

PACKAGE = "elu_study"
# Not inputs of any record: presentation, and bookkeeping whose effect the other inputs capture.
PRESENTATION = ("elu_study/templates/*", "elu_study/jobs/report/*", "elu_study/jobs/*/figures.py",
                "elu_study/jobs/*/notebook.py", "elu_study/jobs/notebooks.py",
                "elu_study/jobs/study/report.py")  # the main record's tables, summary and README block
BOOKKEEPING = ("elu_study/__init__.py", "elu_study/core/record.py", "elu_study/core/schema.py",
               "elu_study/core/fingerprint.py", "elu_study/core/build.py", "elu_study/core/paths.py",
               "elu_study/jobs/records.py")  # __init__.py: the names it loads on first use, no code of its own
CATALOGUE = "elu_study/core/catalog.toml"


def _digest(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()[:16]


# -- code -------------------------------------------------------------------------------------------------------
def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def code_digest(source: str) -> str:
    """A Python file's digest: its syntax tree without docstrings (comments and layout never reach the tree),
    written back as source (``ast.dump`` differs between Python versions; the code it gives does not)."""
    return _digest(ast.unparse(_strip_docstrings(ast.parse(source))))


def _module_path(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _excluded(rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, p) for p in PRESENTATION + BOOKKEEPING)


def _imports(path: Path, name: str) -> set[str]:
    """The elu_study modules a file imports, anywhere in it (lazy imports inside functions too)."""
    found = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # "from pkg import module"
    return {m for m in found if m == PACKAGE or m.startswith(PACKAGE + ".")}


def measuring_modules(roots: tuple[str, ...], root: Path = REPO_ROOT) -> dict[str, Path]:
    """The measuring modules that ``roots`` reach by imports, with their parent packages, by module name."""
    todo, seen = list(roots), {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_path(name, root)
        if path is None or _excluded(path.relative_to(root).as_posix()):
            continue
        seen[name] = path
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += [*_imports(path, name), *parents]
    return dict(sorted(seen.items()))


def all_modules(root: Path = REPO_ROOT) -> tuple[str, ...]:
    """Every module of the package, by name (the test suite's roots: it imports them all)."""
    files = sorted((root / PACKAGE).rglob("*.py"))
    return tuple(".".join(f.relative_to(root).with_suffix("").parts).removesuffix(".__init__") for f in files)


def code_inputs(roots: tuple[str, ...], files: tuple[str, ...] = (), root: Path = REPO_ROOT) -> dict[str, str]:
    """{module or file: digest} for a job's measuring modules and extra files (globs under ``root``, e.g. tests)."""
    found = {name: code_digest(path.read_text()) for name, path in measuring_modules(roots, root).items()}
    for pattern in files:
        for path in sorted(root.glob(pattern)):
            text = path.read_text()
            found[path.relative_to(root).as_posix()] = code_digest(text) if path.suffix == ".py" else \
                _digest(strip_comments(text))
    return found


def catalogue_digest(root: Path = REPO_ROOT, job: str | None = None) -> str:
    """The catalogue as data, or the part of it ``job``'s record reads (``entries.READS``), without the entries'
    descriptions (``what``), the kernel files' SASS claims (the tests check them on every machine) and comments."""
    data = tomllib.loads((root / CATALOGUE).read_text())
    if (reads := entries.READS.get(job)) is not None:
        chosen = [e for e in data.get("entry", []) if reads(entries.Entry(**{**e, "flags": tuple(e.get("flags", ()))}))]
        kernels = set(data["kernels"]) if job == "accuracy" else {e.get("variant") for e in chosen}
        data = {"entry": chosen, "kernels": {n: f for n, f in data["kernels"].items() if n in kernels}}
    data["entry"] = [{k: v for k, v in e.items() if k != "what"} for e in data.get("entry", [])]
    data["kernels"] = {n: {k: v for k, v in f.items() if k != "sass"} for n, f in data.get("kernels", {}).items()}
    return _digest(json.dumps(data, sort_keys=True))


# -- builds -----------------------------------------------------------------------------------------------------
def build_key(variant: str, flags=(), cpp_flags=()) -> str:
    """A build's name in a fingerprint: the variant, then its extra nvcc flags and binding flags (``cpp:``)."""
    return " ".join([variant, *flags, *(f"cpp:{f}" for f in cpp_flags)])


def parse_build_key(key: str) -> tuple[str, list[str], list[str]]:
    """(variant, nvcc flags, binding flags) of a ``build_key``."""
    variant, *flags = key.split(" ")
    return variant, [f for f in flags if not f.startswith("cpp:")], [f[4:] for f in flags if f.startswith("cpp:")]


def build_digest(variant: str, flags=(), cpp_flags=()) -> str:
    """What load_inline receives for a build (sources and the headers they include, without comments; flags),
    the binding that registers it and how (its namespace flags); "missing" where the kernel file no longer exists."""
    try:
        spec = build.build_spec(variant, list(flags), list(cpp_flags))
    except (FileNotFoundError, ValueError):
        return "missing"
    args = build.load_arguments(spec)
    headers = included(args["cuda_sources"], [Path(p) for p in args["extra_include_paths"]])
    args["extra_include_paths"] = [Path(p).relative_to(REPO_ROOT).as_posix() if Path(p).is_relative_to(REPO_ROOT)
                                   else p for p in args["extra_include_paths"]]
    args["cuda_sources"] = [strip_comments(c) for c in args["cuda_sources"]]
    binding = strip_comments(build.BINDING_SOURCE.read_text())  # what registers it and checks its arguments
    return _digest(json.dumps({**args, "headers": headers, "binding": binding, "register": list(cpp_flags)},
                              sort_keys=True))


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def strip_comments(source: str) -> str:
    """C++/CUDA source without comments, trailing blanks and empty lines. A file's ``// elu-study:`` directives are
    comments too: what they ask for reaches the flags, which are digested as flags."""
    code = _C_TOKENS.sub(lambda m: "" if m.group().startswith("/") else m.group(), source)
    return "\n".join(line.rstrip() for line in code.splitlines() if line.strip())


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def included(sources: list[str], paths: list[Path]) -> dict[str, str]:
    """{header: its text's digest} for every quoted #include the sources reach, found in ``paths``."""
    found, todo = {}, list(sources)
    while todo:
        for name in _INCLUDE.findall(todo.pop()):
            path = next((p / name for p in paths if (p / name).is_file()), None)
            if path is not None and name not in found:
                text = path.read_text()
                found[name] = _digest(strip_comments(text))
                todo.append(text)
    return dict(sorted(found.items()))


def logged_builds(log: Path) -> list[dict]:
    """The builds a run's processes loaded, from its build log (one JSON object a line), each once."""
    if not log.is_file():
        return []
    seen = {}
    for line in log.read_text().splitlines():
        if line.strip():
            b = json.loads(line)
            seen[build_key(b["variant"], b["flags"], b["cpp_flags"])] = b
    return [seen[k] for k in sorted(seen)]


def build_inputs(builds: list[dict]) -> dict[str, str]:
    """{build key: digest} for builds given as {"variant", "flags", "cpp_flags"}."""
    return {build_key(b["variant"], b["flags"], b["cpp_flags"]): build_digest(b["variant"], b["flags"], b["cpp_flags"])
            for b in builds}


# -- the whole ----------------------------------------------------------------------------------------------------
def toolchain(provenance: dict) -> dict[str, str | None]:
    """The toolchain fields of a record's provenance (or of ``hardware.provenance()``)."""
    return {k: provenance.get(k) for k in ("gpu", "driver", "cuda_runtime", "torch")}


def fingerprint(roots: tuple[str, ...], files: tuple[str, ...], builds: list[dict], tools: dict,
                root: Path = REPO_ROOT, job: str | None = None) -> dict:
    return {"code": code_inputs(roots, files, root), "catalogue": catalogue_digest(root, job),
            "builds": build_inputs(builds), "toolchain": tools}


def changes(held: dict | None, roots: tuple[str, ...], files: tuple[str, ...] = (), tools: dict | None = None,
            root: Path = REPO_ROOT, job: str | None = None) -> list[str]:
    """What changed since ``held`` was taken, one phrase per input (empty: the record is current). ``tools`` is
    this machine's toolchain, or None where none is compared (no GPU here)."""
    if not held:
        return ["no fingerprint"]
    found = []
    now = code_inputs(roots, files, root)
    for name in sorted(set(now) | set(held["code"])):
        if name not in now and _no_longer_an_input(name, root):
            continue  # presentation or bookkeeping now (or a file the stage no longer reads): it voids nothing
        if now.get(name) != held["code"].get(name):
            what = "new" if name not in held["code"] else "gone" if name not in now else "changed"
            found.append(f"code {name} ({what})")
    if catalogue_digest(root, job) != held["catalogue"]:
        found.append(f"catalogue {CATALOGUE}")
    for key, digest in held["builds"].items():
        if build_digest(*parse_build_key(key)) != digest:
            found.append(f"build {key}")
    for key, value in (tools or {}).items():
        if held["toolchain"].get(key) != value:
            found.append(f"toolchain {key} {held['toolchain'].get(key)} -> {value}")
    return found


def _no_longer_an_input(name: str, root: Path) -> bool:
    """Whether a module a fingerprint holds is one this code leaves out of every record (a module that was deleted
    or moved is gone: what it did now happens elsewhere, or not at all)."""
    path = _module_path(name, root) if "/" not in name else None
    return path is not None and _excluded(path.relative_to(root).as_posix())


def summary(reasons: list[str], shown: int = 3) -> str:
    """``changes``' phrases grouped by kind (code, catalogue, build, toolchain), at most ``shown`` named per kind."""
    kinds: dict[str, list[str]] = {}
    for phrase in reasons:
        kind, _, what = phrase.partition(" ")
        kinds.setdefault(kind, []).append(what)
    return "; ".join(f"{kind} {', '.join(items[:shown])}" + (f" and {len(items) - shown} more" if len(items) > shown
                                                               else "") for kind, items in kinds.items())


def catalogue_current(rec: dict | None, root: Path = REPO_ROOT) -> bool:
    """Whether a record was measured with this catalogue (the part its job reads). Where it was not, the entries it
    lacks are new since: not measured yet (tables say so), and the record is due."""
    job = ((rec or {}).get("schema") or {}).get("job")
    return ((rec or {}).get("fingerprint") or {}).get("catalogue") == catalogue_digest(root, job)
