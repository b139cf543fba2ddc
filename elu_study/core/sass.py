"""What the compiler made of a variant: its SASS and its resource report, read with cuobjdump."""

import os
import re
import subprocess
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

from elu_study.core.build import built_library, find_cuda_tool

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)", re.MULTILINE)
# An instruction: its address, its opcode with modifiers (after any predicate) and a branch's target address.
_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(?:\s+0x([0-9a-f]+)\s*;)?")
_RESOURCES = re.compile(r"Function\s+(\S+):\s*\n\s*REG:(\d+)\s+STACK:(\d+)\s+SHARED:(\d+)\s+LOCAL:(\d+)")
# Not a step's own kernel: the shared helpers (namespace elu, kernels/common/elu.cuh) and 16-bit storage paths.
_HELPER_PREFIX = "_ZN3elu"
_SIXTEEN_BIT = re.compile(r"__half|__nv_bfloat16|scalar16")


def _cuobjdump(*args: str) -> str:
    cuobjdump = find_cuda_tool("cuobjdump")
    env = {**os.environ, "PATH": f"{Path(cuobjdump).parent}{os.pathsep}{os.environ.get('PATH', '')}"}  # runs nvdisasm
    return subprocess.run([cuobjdump, *args], check=True, capture_output=True, text=True, env=env).stdout


def _code(library: Path) -> dict[str, list[tuple[int, str, int | None]]]:
    """Each kernel's instructions in a built library: (address, opcode, branch target or None)."""
    parts = _FUNCTION.split(_cuobjdump("--dump-sass", str(library)))
    return {name: [(int(a, 16), op, int(to, 16) if to else None) for a, op, to in _INSTRUCTION.findall(body)]
            for name, body in zip(parts[1::2], parts[2::2])}


def sass_by_function(library: Path) -> dict[str, list[str]]:
    """Opcodes (with modifiers, e.g. ``LDG.E.128.CONSTANT``) of each kernel in a built library."""
    return {name: [op for _, op, _ in code] for name, code in _code(library).items()}


def loops(library: Path) -> dict[str, list[list[str]]]:
    """Each kernel's loops: the opcodes from a backward branch's target to the branch, the body a thread repeats."""
    out = {}
    for name, code in _code(library).items():
        at = {a: k for k, (a, _, _) in enumerate(code)}
        out[name] = [[op for _, op, _ in code[at[to]:k + 1]] for k, (a, op, to) in enumerate(code)
                     if op == "BRA" and to is not None and to < a]
    return out


def named(found: dict, fragment: str):
    """Of ``sass_by_function``'s or ``loops``' result, the one kernel's whose (mangled) name holds ``fragment``."""
    (name,) = [n for n in found if fragment in n]
    return found[name]


@dataclass(frozen=True)
class KernelReport:
    """One kernel's SASS summary: memory access widths, exponential, registers and spills."""

    function: str
    loads: dict[str, int]  # global load opcode -> count
    stores: dict[str, int]
    mufu_ex2: int  # hardware 2^x instructions
    fp32_ops: int  # FFMA + FMUL + FADD
    round_down_ffma: int  # FFMA.RM: the range reduction of the accurate expf
    ftz_ops: int  # .FTZ arithmetic: denormals flushed (--use_fast_math)
    registers: int
    stack_bytes: int
    local_bytes: int  # > 0 means spills or arrays in local memory

    def to_dict(self) -> dict:  # what the record keeps, for a reader without nvcc
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "KernelReport":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})

    @property
    def access_bits(self) -> set[int]:
        """Widths of the global loads and stores, in bits (32 for plain LDG.E)."""
        return {int(m.group(1)) if (m := re.search(r"\.(64|128)\b", op)) else 32 for op in (*self.loads, *self.stores)}

    @property
    def fp32_ops_per_ex2(self) -> float:
        return self.fp32_ops / self.mufu_ex2 if self.mufu_ex2 else float("nan")

    @property
    def exponential(self) -> str:
        """__expf: a multiply and an ex2 (~3 fp32 ops); expf adds a range reduction (FFMA.RM, ~7); expm1f ~15+."""
        if not self.mufu_ex2:
            return "none"
        if self.round_down_ffma:
            return "accurate expf (range-reduced ex2)"
        return ("fast __expf (bare ex2)" if self.fp32_ops_per_ex2 <= 4
                else "accurate, polynomial around ex2 (expm1f, or step 6's polynomial split)")

    def summary(self) -> str:
        widths = "/".join(f"{b}-bit" for b in sorted(self.access_bits))
        ops = ", ".join(f"{op} x{n}" for op, n in sorted({**self.loads, **self.stores}.items()))
        return (f"{self.function}\n  global accesses: {widths} ({ops})\n  exponential: {self.exponential}, "
                f"MUFU.EX2 x{self.mufu_ex2}, {self.fp32_ops_per_ex2:.0f} fp32 ops per ex2, "
                f"{'denormals flushed (.FTZ)' if self.ftz_ops else 'denormals kept'}\n"
                f"  registers: {self.registers}, stack: {self.stack_bytes} B, local (spills): {self.local_bytes} B")


def resource_usage(library: Path) -> dict[str, dict[str, int]]:
    """Registers, stack, shared and local bytes per kernel, from the compiler's resource report."""
    text = _cuobjdump("--dump-resource-usage", str(library))
    return {name: {"registers": int(r), "stack": int(st), "shared": int(sh), "local": int(lo)}
            for name, r, st, sh, lo in _RESOURCES.findall(text)}


def inspect_variant(module) -> KernelReport:
    """The SASS report of a variant's own kernel (not the shared fallback, nor a 16-bit path's)."""
    library = built_library(module)
    sass = sass_by_function(library)
    own = [name for name in sass if not name.startswith(_HELPER_PREFIX) and not _SIXTEEN_BIT.search(name)]
    if len(own) != 1:
        raise ValueError(f"expected one kernel outside namespace elu in {library.name}, found {own}")
    name, ops = own[0], sass[own[0]]
    usage = resource_usage(library)[name]
    fp32 = [op for op in ops if op.split(".")[0] in ("FFMA", "FMUL", "FADD")]
    return KernelReport(
        function=name,
        loads=dict(Counter(op for op in ops if op.startswith("LDG"))),
        stores=dict(Counter(op for op in ops if op.startswith("STG"))),
        mufu_ex2=ops.count("MUFU.EX2"),
        fp32_ops=len(fp32),
        round_down_ffma=sum(op.startswith("FFMA") and ".RM" in op for op in ops),
        ftz_ops=sum(".FTZ" in op for op in fp32),
        registers=usage["registers"], stack_bytes=usage["stack"], local_bytes=usage["local"],
    )
