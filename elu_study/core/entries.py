"""The entry catalogue: every row the study can measure, what it builds and which question it answers. The entries
are data (``catalog.toml`` beside this file); this module loads them and answers questions about them."""

import tomllib
from dataclasses import dataclass
from pathlib import Path

from elu_study.core.build import compile_variant, known_variants

ALPHA = 1.0
DTYPES16 = ("bfloat16", "float16")
NOT_MEASURED = "not measured yet"  # how tables show an entry that its record lacks (added since it was measured)
BYTES_PER_ELEMENT = {"": 4, "in_place": 4, "bfloat16": 2, "float16": 2}  # per direction, by mode


@dataclass(frozen=True)
class Entry:
    """One row of the study: a step (a kernel build), an ablation of one, a baseline, a peer or an attempt."""

    name: str
    kind: str  # its role: "baseline", "step", "peer", "ablation", "attempt" or "backward"
    what: str
    variant: str | None = None
    flags: tuple[str, ...] = ()
    checked: bool = True  # copies compute no ELU
    group: str = ""  # the question it answers (see GROUPS)
    base: str | None = None  # the entry this one differs from by exactly one change
    mode: str = ""  # how the build is called: "" (out=y, float32), "in_place" (out=x), "bfloat16", "float16"
    direction: str = "forward"  # or "backward": grad and x in, grad_input out (its roof is torch.add)
    sustained: bool = False  # also timed under sustained load by its job (power, clock, energy: one change each)

    @property
    def dtype(self) -> str:
        return self.mode if self.mode in DTYPES16 else "float32"

    def build(self):
        return compile_variant(self.variant, extra_cuda_cflags=list(self.flags))


@dataclass(frozen=True)
class Launch:
    """The launch knobs of a kernel file (``[kernels.<file>].launch``): what the launch model reads."""

    threads: str  # the macro (or constexpr int) of the file that sets threads per block
    vectors: str | None = None  # the one that sets vectors per thread (None: one)
    access: str = "float4"  # what one access moves: a float4 (16 bytes) or one "element"
    grid_stride: bool = False


@dataclass(frozen=True)
class Kernel:
    """A kernels/ file's facts beyond its code (``[kernels.<file>]`` in catalog.toml)."""

    name: str
    formula: str  # the accuracy formula it computes (jobs/accuracy/definitions.py's FORMULAS)
    sass: dict  # what its SASS must show: bits (access widths), loads, exp, ftz (tests/test_build.py)
    launch: Launch | None = None  # None: the launch model does not cover it


_CATALOG = tomllib.loads((Path(__file__).with_name("catalog.toml")).read_text())
KERNELS = {name: Kernel(name, k["formula"], k["sass"], Launch(**k["launch"]) if "launch" in k else None)
           for name, k in _CATALOG["kernels"].items()}
GROUPS: dict[str, str] = _CATALOG["groups"]


def entry_of(table: dict) -> Entry:
    return Entry(**{**table, "flags": tuple(table.get("flags", ()))})


_ALL = tuple(entry_of(e) for e in _CATALOG["entry"])
ENTRIES = {e.name: e for e in _ALL}
if len(ENTRIES) != len(_ALL):
    raise ValueError("elu_study/core/catalog.toml: entry names must be unique")
for _e in _ALL:
    if _e.base is not None and _e.base not in ENTRIES:
        raise ValueError(f"elu_study/core/catalog.toml: {_e.name}'s base {_e.base!r} is not an entry")
    if _e.group and _e.group not in GROUPS:
        raise ValueError(f"elu_study/core/catalog.toml: {_e.name}'s group {_e.group!r} is not in [groups]")


def _of(kind: str, group: str = "") -> tuple[Entry, ...]:
    return tuple(e for e in _ALL if e.kind == kind and e.group.startswith(group))


BASELINES, PEERS, STEPS = _of("baseline"), _of("peer"), _of("step")
ATTEMPTS = _of("attempt", "step6")  # step 6's attempts and its other calls (notebook 08, `python -m elu_study beyond`)
STEP7 = _of("attempt", "step7")  # step 7's builds and rows, both 16-bit dtypes (notebook 12)
BACKWARD = _of("backward")  # the float32 backward against its roof, torch.add
# Step 7's rows the main record holds (each against its own dtype's roof): the roofs, PyTorch, the peers, the step.
SIXTEEN_IN_STUDY = ("copy_", "F.elu", "torch.compile(F.elu)", "triton", "cub_transform", "7_sixteen_bits",
                    "torch.add", "aten.elu_backward", "7_backward")
KINDS = ("baseline", "step", "peer", "ablation")  # the main study's rows; "attempt" rows are step 6's record
# The halves of a read+write stream whose summed medians are the measured floor (see annotate).
STREAM_HALVES = ("read_only", "write_only")


def study_entries() -> list[Entry]:
    """The main study's rows (``python -m elu_study``), in this order."""
    sixteen = [ENTRIES[f"{name} {dtype}"] for dtype in DTYPES16 for name in SIXTEEN_IN_STUDY]
    return [e for e in ENTRIES.values() if e.kind in KINDS] + list(BACKWARD) + sixteen


def in_study(e: Entry) -> bool:
    """Whether an entry is one of ``study_entries``, decided from the entry alone."""
    return e.kind in KINDS or e.kind == "backward" or (e.mode in DTYPES16 and e.name.split()[0] in SIXTEEN_IN_STUDY)


# The entries each job's record measures, by record (a record is due when one of them changes or a new one appears;
# jobs not named here read the whole catalogue). The accuracy job reads every kernel file's formula, no entry.
READS = {
    "study": in_study,
    "ncu": lambda e: e.kind in KINDS and e.name != "copy_",  # profiled_entries
    "beyond": lambda e: e.group.startswith("step6") or e.kind in ("baseline", "step"),
    "sixteen": lambda e: e.group.startswith("step7") or e.dtype in DTYPES16,
    "sizes": lambda e: e.kind in ("step", "peer", "baseline"),
    "accuracy": lambda e: False, "model": lambda e: False, "launch": lambda e: False,
}


def sustained_entries(among: list[Entry] | tuple[Entry, ...] | None = None) -> list[Entry]:
    """The rows of ``among`` (default: the main study's) also timed under sustained load (3-6 s each): steps, peers,
    F.elu (compiled too), step 7's and the backward's defaults, those marked ``sustained``, and the roofs that one of
    them is taken over. The other baselines bound or explain a short time; no table reads them sustained."""
    rows = [e for e in (study_entries() if among is None else among) if e.sustained or e.kind in ("step", "peer")
            or e.name.split()[0] in ("F.elu", "torch.compile(F.elu)", "elu_backward", "7_sixteen_bits", "7_backward",
                                     "copy_", "torch.add")]
    roofs = {e.name for e in rows} & {roof_for(d, t) for d in ("forward", "backward") for t in ("float32", *DTYPES16)}
    needed = {roof_for(e.direction, e.dtype) for e in rows if e.name not in roofs}
    return [e for e in rows if e.name not in roofs or e.name in needed]


def profiled_entries() -> list[Entry]:
    """What ``profile`` reads counters of: the float32 forward rows that launch a kernel (copy_ is a driver copy)."""
    return [e for e in study_entries() if READS["ncu"](e)]


def is_backward(name: str) -> bool:
    """Whether a row is a backward one (or its roof, torch.add), of any dtype."""
    return getattr(ENTRIES.get(name), "direction", None) == "backward"


def roof_for(direction: str, dtype: str) -> str:
    """The row a row's time is taken over: its dtype's copy_, or its dtype's torch.add for a backward row."""
    roof = "torch.add" if direction == "backward" else "copy_"
    return f"{roof} {dtype}" if dtype in DTYPES16 else roof


def roof_of(name: str, mode: str = "") -> str:
    return roof_for("backward" if is_backward(name) else "forward", mode)


def group(name: str) -> list[Entry]:
    """The entries that answer one question (see GROUPS), in the order they are listed."""
    if name not in GROUPS:
        raise KeyError(f"unknown group {name!r}; groups: {', '.join(GROUPS)}")
    return [e for e in _ALL if e.group == name]


def builds(entries=None) -> list[tuple[str, tuple[str, ...]]]:
    """Every (variant, flags) that entries compile (default: the whole study)."""
    return sorted({(e.variant, e.flags) for e in (study_entries() if entries is None else entries) if e.variant})


def resolve(entries) -> list[Entry]:
    return [ENTRIES[e] if isinstance(e, str) else e for e in entries]


def stream_floor_ms(rows) -> float | None:
    """A read+write stream's measured floor: read_only's and write_only's medians summed (None: one is missing)."""
    ms = {r["name"]: r["timing"]["median_ms"] for r in rows}
    return sum(ms[n] for n in STREAM_HALVES) if all(n in ms for n in STREAM_HALVES) else None


def grid_stride_blocks(entry: Entry | str, sm_count: int, numel: int) -> int:
    """The grid a grid-stride entry launches at full size (the launcher's rule, in Python)."""
    entry = ENTRIES[entry] if isinstance(entry, str) else entry
    kernel = KERNELS.get(entry.variant)
    if not (kernel and kernel.launch and kernel.launch.grid_stride):
        raise ValueError(f"{entry.name} is not a grid-stride entry")
    knobs = dict(f[2:].split("=") for f in entry.flags if f.startswith("-DELU_GRID_"))
    threads = int(knobs.get("ELU_GRID_THREADS", 512))
    waves = int(knobs.get("ELU_GRID_WAVES", 0))
    needed = -(-(numel // 4) // threads)
    per_sm = 2048 // threads  # these kernels use few registers: the thread limit decides
    wanted = 1152 if waves == 0 else needed if waves < 0 else waves * sm_count * per_sm
    return min(needed, wanted)


def fuzz_builds(which: str) -> list[tuple[str, tuple[str, ...]]]:
    """The (variant, flags) builds to fuzz and sanitize: every build of the study ("all"), or one per kernel file."""
    return builds() if which == "all" else [(name, ()) for name in known_variants()]


def computes_elu(variant: str, flags: tuple[str, ...] | list[str] = ()) -> bool:
    """Whether a build's results compare with ELU: not where every entry of it is unchecked (a copy kernel)."""
    entries = [e for e in ENTRIES.values() if e.variant == variant and tuple(e.flags) == tuple(flags)]
    return not entries or any(e.checked for e in entries)


def build_id(variant: str, flags: tuple[str, ...] | list[str] = ()) -> str:
    """A build's name in test ids and records: ``3_grid_stride`` or ``3_grid_stride[-DELU_GRID_WAVES=2]``."""
    return f"{variant}[{' '.join(flags)}]" if flags else str(variant)
