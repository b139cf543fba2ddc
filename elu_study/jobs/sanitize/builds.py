"""Which builds the sanitizer runs over, and what its child needs to load each one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elu_study.core.build import compile_variant, resolve_variant
from elu_study.core.entries import build_id, computes_elu, fuzz_builds
from elu_study.core.ops import accepted_dtypes, ops_of


@dataclass(frozen=True)
class Build:
    id: str
    variant: str
    flags: tuple[str, ...] = ()
    computes_elu: bool = True  # False: a copy kernel, whose results are read but not compared with ELU


def build_of(variant: str, flags=()) -> Build:
    """The Build of a step's file (with these extra flags), or of a .cu file of one's own."""
    if str(variant).endswith(".cu"):
        return Build(build_id(Path(variant).name, tuple(flags)), str(variant), tuple(flags))
    return Build(build_id(variant, tuple(flags)), str(variant), tuple(flags), computes_elu(variant, flags))


def select_builds(names: list[str] | None = None) -> list[Build]:
    """The builds named (a step: all its builds; or a .cu file), else every build the study compiles."""
    every, chosen = [build_of(v, f) for v, f in fuzz_builds("all")], []
    for name in names or ():
        if str(name).endswith(".cu"):
            chosen.append(build_of(str(resolve_variant(name))))
            continue
        stem = resolve_variant(name).stem  # raises ValueError listing the known steps
        matching = [b for b in every if b.variant == stem] or [build_of(stem)]
        chosen += [b for b in matching if b not in chosen]
    return chosen or every


def library_entry(b: Build) -> dict:
    """What the child needs to load a build (compiled here if need be), with the dtypes each op takes."""
    module = compile_variant(b.variant, extra_cuda_cflags=list(b.flags))
    dtypes = {op.name: [str(d).removeprefix("torch.") for d in accepted_dtypes(module, op)] for op in ops_of(module)}
    return {"id": b.id, "module": module.__name__, "library": module.__file__, "computes_elu": b.computes_elu,
            "dtypes": dtypes}
