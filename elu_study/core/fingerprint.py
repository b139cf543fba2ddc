"""What determines a record, each input with its digest: a record is measured again only when one of them changed.

- ``code``: per measuring module its job imports (statically, lazy imports too), the definitions its job's code
  reaches by name (``reached``: a function no code of the job calls voids nothing), plus extra files such as
  ``tests/``, as their text without docstrings, comments and blank lines (``code_digest``). Presentation and
  bookkeeping modules (``PRESENTATION``, ``BOOKKEEPING``) are not inputs: the builds' digests capture what the build
  code passes to the compiler.
- ``catalogue``: the part of ``catalog.toml`` its job reads (``entries.READS``), without descriptions and SASS
  claims: a new step voids the records that would measure it, not every record.
- ``builds``: every kernel build its processes loaded (sources, included headers, flags), from the run's build log.
- ``toolchain``: GPU, driver, CUDA and torch (``TOOLCHAIN``), compared only where a GPU runs the plan.

``changes`` names the inputs that differ; ``python -m elu_study records --plan`` prints them."""

import ast
import fnmatch
import hashlib
import importlib.util
import io
import json
import re
import tokenize
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
def code_digest(source: str) -> str:
    """A Python file's text without docstrings, comments and blank lines. The text, not ``ast.unparse``'s: that
    differs between Python versions (f-strings), and a record measured under one must stay current under another."""
    lines = source.split("\n")  # as ast and tokenize count lines (splitlines also splits at \f, \x1c, ...)
    spans = [(t.start, t.end) for t in tokenize.generate_tokens(io.StringIO(source).readline)
             if t.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ast.get_docstring(node, clean=False) is not None:
            doc = node.body[0]  # ast's columns count UTF-8 bytes, tokenize's characters
            chars = [len(lines[n - 1].encode()[:c].decode()) for n, c in ((doc.lineno, doc.col_offset),
                                                                         (doc.end_lineno, doc.end_col_offset))]
            spans.append(((doc.lineno, chars[0]), (doc.end_lineno, chars[1])))
    for (l0, c0), (l1, c1) in sorted(spans, reverse=True):  # from the end: earlier positions stay valid
        lines[l0 - 1:l1] = [lines[l0 - 1][:c0] + lines[l1 - 1][c1:]]
    return _digest("\n".join(line.rstrip() for line in lines if line.strip()))


def _module_path(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def _excluded(rel: str) -> bool:
    return any(fnmatch.fnmatch(rel, p) for p in PRESENTATION + BOOKKEEPING)


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
        imports = [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, (ast.Import, ast.ImportFrom))]
        todo += [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]  # its parent packages
        todo += [t[1] for node in imports for t in _bound(node, name, path, root).values()]  # anywhere in it
        todo += [a.name for node in imports if isinstance(node, ast.Import) for a in node.names  # import a.b.c
                 if a.name.startswith(PACKAGE + ".")]
    return dict(sorted(seen.items()))


REST = "<module>"  # a module's statements that define no name (they run whenever it is imported)


def _units(source: str, path: Path, name: str, root: Path) -> tuple[dict[str, list[ast.stmt]], dict[str, tuple]]:
    """A module's top-level statements by the name each defines (REST: those that define none, and the imports), and
    what each imported name refers to: ("module", M) or ("name", M, n), for elu_study's modules only."""
    units: dict[str, list[ast.stmt]] = {REST: []}
    aliases: dict[str, tuple] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):  # what a name refers to: its text counts as REST's
            aliases |= _bound(node, name, path, root)
            units[REST].append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            units[node.name] = [node]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            for n in names or [REST]:
                units.setdefault(n, []).append(node)
        else:
            units[REST].append(node)
    return units, aliases


def _bound(node: ast.Import | ast.ImportFrom, name: str, path: Path, root: Path) -> dict[str, tuple]:
    """The names an import statement binds to elu_study's modules and their definitions."""
    if isinstance(node, ast.Import):
        return {(a.asname or a.name).split(".")[0]: ("module", a.name if a.asname else a.name.split(".")[0])
                for a in node.names if a.name.split(".")[0] == PACKAGE}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    if base.split(".")[0] != PACKAGE:
        return {}
    return {a.asname or a.name: ("module", f"{base}.{a.name}") if _module_path(f"{base}.{a.name}", root)
            else ("all", base) if a.name == "*" else ("name", base, a.name) for a in node.names}


def _needs(nodes: list[ast.stmt], units: set[str], aliases: dict[str, tuple], module: str, path: Path,
           root: Path) -> set[tuple[str, str]]:
    """The definitions some statements use: (module, name), or (module, "*") for all of a module."""
    walked = [n for stmt in nodes for n in ast.walk(stmt)]
    attr_of = {id(n.value): n.attr for n in walked if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}
    found = set()
    for node in walked:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if not any(node is stmt for stmt in nodes):  # a lazy import: all of each module it names
                found |= {(t[1], "*") for t in _bound(node, module, path, root).values()}
        elif isinstance(node, ast.Name) and node.id in units:
            found.add((module, node.id))
        elif isinstance(node, ast.Name) and (target := aliases.get(node.id)) is not None:
            # a module: the attribute read of it, or all of it where it is used as a value
            found.add((target[1], target[2]) if target[0] == "name" else
                      (target[1], attr_of.get(id(node), "*") if target[0] == "module" else "*"))
    return found


def reached(roots: tuple[str, ...], root: Path = REPO_ROOT) -> dict[str, dict[str, str]]:
    """The definitions of measuring modules that the roots' code uses, directly or through others: by module, the
    text of each name reached (every definition of a root module; REST of every module imported)."""
    paths = measuring_modules(roots, root)
    sources = {m: p.read_text() for m, p in paths.items()}
    parsed = {m: _units(sources[m], p, m, root) for m, p in paths.items()}
    lines = {m: text.split("\n") for m, text in sources.items()}

    def text(module: str, stmts: list[ast.stmt]) -> str:  # each statement once (one may define several names)
        return "\n".join(dict.fromkeys(_source(stmt, lines[module]) for stmt in stmts))

    todo, out = [(m, "*") for m in roots], {}
    for module, (units, aliases) in parsed.items():  # what runs on import, in every module the job imports
        out[module] = {REST: text(module, units[REST])}
        todo += _needs(units[REST], set(units), aliases, module, paths[module], root)
    while todo:
        module, name = todo.pop()
        if module not in parsed:
            continue  # presentation, bookkeeping or outside the package
        units, aliases = parsed[module]
        if name != "*" and name not in units:  # imported here from another module, or a submodule of a package
            target = aliases.get(name) or ("module", f"{module}.{name}")
            todo.append((target[1], target[2] if target[0] == "name" else "*"))
            continue
        for n in units if name == "*" else [name]:
            if n not in out[module]:
                out[module][n] = text(module, units[n])
                todo += _needs(units[n], set(units), aliases, module, paths[module], root)
    return out


def _source(stmt: ast.stmt, lines: list[str]) -> str:
    """A top-level statement's text, its decorators included."""
    first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))])
    return "\n".join(lines[first - 1:stmt.end_lineno])


def code_inputs(roots: tuple[str, ...], files: tuple[str, ...] = (), root: Path = REPO_ROOT) -> dict[str, str]:
    """{module or file: digest} for a job's measuring code and extra files (globs under ``root``): per module, the
    definitions its job reaches (``reached``), so an edit of a function no code of the job calls voids nothing."""
    found = {module: _digest("\n".join(f"{name}: {code_digest(text)}" for name, text in sorted(units.items())))
             for module, units in reached(roots, root).items()}
    for path in (p for pattern in files for p in sorted(root.glob(pattern))):
        text = path.read_text()
        found[path.relative_to(root).as_posix()] = code_digest(text) if path.suffix == ".py" else \
            _digest(strip_comments(text))
    return found


def catalogue_digest(root: Path = REPO_ROOT, job: str | None = None) -> str:
    """The catalogue as data, or the part ``job`` reads; without descriptions and SASS claims (the tests check those
    on every machine)."""
    data = tomllib.loads((root / CATALOGUE).read_text())
    if (reads := entries.READS.get(job)) is not None:
        chosen = [e for e in data.get("entry", []) if reads(entries.entry_of(e))]
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


def stale_variants(builds: dict[str, str]) -> list[str]:
    """The kernel files (variants) of a record's builds, ``fingerprint["builds"]``, whose sources, headers or flags
    changed since it was measured: its numbers for them are an earlier build's."""
    return sorted({parse_build_key(key)[0] for key, digest in builds.items()
                   if build_digest(*parse_build_key(key)) != digest})


def earlier_variants(record: dict) -> set[str]:
    """The kernel files of a record's builds whose build changed since it was measured (``stale_variants``): its
    numbers for them, and any grade of those numbers (``tables.as_built``), are an earlier build's."""
    return set(stale_variants((record.get("fingerprint") or {}).get("builds") or {}))


def build_digest(variant: str, flags=(), cpp_flags=()) -> str:
    """What load_inline receives for a build (sources and their headers without comments, flags) and the binding
    that registers it; "missing" where the kernel file no longer exists."""
    try:
        spec = build.build_spec(variant, list(flags), list(cpp_flags))
    except (FileNotFoundError, ValueError):
        return "missing"
    args = build.load_arguments(spec)
    headers = included(args["cuda_sources"], [Path(p) for p in args["extra_include_paths"]])
    args["extra_include_paths"] = [Path(p).relative_to(REPO_ROOT).as_posix() if Path(p).is_relative_to(REPO_ROOT)
                                   else p for p in args["extra_include_paths"]]
    # #line names a file by its full path (core.build): the repository's by their names in it, as in every checkout
    args["cuda_sources"] = [strip_comments(c.replace(f'"{REPO_ROOT}/', '"')) for c in args["cuda_sources"]]
    binding = strip_comments(build.BINDING_SOURCE.read_text())  # what registers it and checks its arguments
    return _digest(json.dumps({**args, "headers": headers, "binding": binding, "register": list(cpp_flags)},
                              sort_keys=True))


_C_TOKENS = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.DOTALL)


def strip_comments(source: str) -> str:
    """C++/CUDA source without comments and blank lines (``// elu-study:`` directives reach the digest as flags)."""
    code = _C_TOKENS.sub(lambda m: "" if m.group().startswith("/") else m.group(), source)
    return "\n".join(line.rstrip() for line in code.splitlines() if line.strip())


_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def included(sources: list[str], paths: list[Path]) -> dict[str, str]:
    """{header: digest} for every quoted #include the sources reach, found in ``paths``."""
    found, todo = {}, list(sources)
    while todo:
        for name in _INCLUDE.findall(todo.pop()):
            path = next((p / name for p in paths if (p / name).is_file()), None)
            if path is not None and name not in found:
                text = path.read_text()
                found[name] = _digest(strip_comments(text))
                todo.append(text)
    return dict(sorted(found.items()))


def logged_builds(log: Path) -> list[str]:
    """The ``build_key`` of each build a run's processes loaded, from its build log (one JSON object a line)."""
    lines = filter(str.strip, log.read_text().splitlines() if log.is_file() else [])
    return sorted({build_key(b["variant"], b["flags"], b["cpp_flags"]) for b in map(json.loads, lines)})


# -- the whole ----------------------------------------------------------------------------------------------------
TOOLCHAIN = ("gpu", "driver", "cuda_runtime", "torch")  # the provenance fields a record's toolchain holds


def fingerprint(roots: tuple[str, ...], files: tuple[str, ...], builds: list[str], tools: dict,
                root: Path = REPO_ROOT, job: str | None = None) -> dict:
    """A record's fingerprint, ``builds`` given by their ``build_key``."""
    return {"code": code_inputs(roots, files, root), "catalogue": catalogue_digest(root, job),
            "builds": {key: build_digest(*parse_build_key(key)) for key in builds}, "toolchain": tools}


def changes(held: dict | None, roots: tuple[str, ...], files: tuple[str, ...] = (), tools: dict | None = None,
            root: Path = REPO_ROOT, job: str | None = None) -> list[str]:
    """What changed since ``held`` was taken, one phrase per input (empty: current). ``tools``: this machine's
    toolchain, None where none is compared."""
    if not held:
        return ["no fingerprint"]
    found, now = [], fingerprint(roots, files, list(held["builds"]), tools or {}, root, job)
    for name in sorted(set(now["code"]) | set(held["code"])):
        path = None if name in now["code"] or "/" in name else _module_path(name, root)
        if path is not None and _excluded(path.relative_to(root).as_posix()):
            continue  # presentation or bookkeeping now: it voids nothing (a deleted module is gone, and due)
        if now["code"].get(name) != held["code"].get(name):
            what = "new" if name not in held["code"] else "gone" if name not in now["code"] else "changed"
            found.append(f"code {name} ({what})")
    if now["catalogue"] != held["catalogue"]:
        found.append(f"catalogue {CATALOGUE}")
    found += [f"build {key}" for key, digest in held["builds"].items() if now["builds"][key] != digest]
    old = held["toolchain"]
    return found + [f"toolchain {k} {old.get(k)} -> {v}" for k, v in now["toolchain"].items() if old.get(k) != v]


def summary(reasons: list[str], shown: int = 3) -> str:
    """``changes``' phrases grouped by kind, at most ``shown`` named per kind."""
    kinds: dict[str, list[str]] = {}
    for phrase in reasons:
        kind, _, what = phrase.partition(" ")
        kinds.setdefault(kind, []).append(what)
    return "; ".join(f"{kind} {', '.join(items[:shown])}" + (f" and {len(items) - shown} more" if len(items) > shown
                                                               else "") for kind, items in kinds.items())


def catalogue_current(rec: dict | None, root: Path = REPO_ROOT) -> bool:
    """Whether a record was measured with this catalogue (the part its job reads)."""
    job = ((rec or {}).get("schema") or {}).get("job")
    return ((rec or {}).get("fingerprint") or {}).get("catalogue") == catalogue_digest(root, job)
