"""What kernels/7_sixteen_bits.cu says about itself, read from its source (no GPU, no compiler): each fast
formula's eps (``static constexpr float kEps = ...;`` in its struct), which formula ``Auto`` picks for each
dtype (``FormulaOf`` specializations), and so which formula a build of the file uses on a dtype."""

from __future__ import annotations

import re

from elu_study.core.build import resolve_variant

VARIANT = "7_sixteen_bits"
C_TYPES = {"__nv_bfloat16": "bfloat16", "__half": "float16", "float": "float32"}
_STRUCT = re.compile(r"^struct (\w+)", re.MULTILINE)
_EPS = re.compile(r"static\s+constexpr\s+float\s+kEps\s*=\s*([^;]+);")
_CHOICE = re.compile(r"FormulaOf<\s*(\w+)\s*,\s*(\w+)\s*>\s*\{\s*using\s+type\s*=\s*(\w+)\s*;")


def source() -> str:
    return resolve_variant(VARIANT).read_text()


def literal_value(text: str) -> float:
    """A C float literal's value: ``0x1p-17f`` -> 2^-17, ``1e-5f`` -> 1e-5."""
    text = text.strip().rstrip("fF")
    return float.fromhex(text) if text.lower().lstrip("+-").startswith("0x") else float(text)


def eps_by_formula(text: str | None = None) -> dict[str, dict]:
    """{formula: {"literal": "0x1p-17f", "eps": 2**-17}} for every struct of the file that declares a kEps."""
    text = source() if text is None else text
    starts = list(_STRUCT.finditer(text))
    out = {}
    for i, m in enumerate(starts):
        body = text[m.end():starts[i + 1].start() if i + 1 < len(starts) else len(text)]
        eps = _EPS.search(body)
        if eps:
            out[m.group(1)] = {"literal": eps.group(1).strip(), "eps": literal_value(eps.group(1))}
    return out


def choices(text: str | None = None) -> dict[tuple[str, str], str]:
    """{(dtype, chooser): formula}: what a chooser such as ``Auto`` resolves to on each dtype."""
    text = source() if text is None else text
    return {(C_TYPES.get(t, t), chooser): formula for t, chooser, formula in _CHOICE.findall(text)}


def knob(flags, name: str, text: str | None = None) -> str:
    """A build's ``ELU7_<name>``: its -D flag, else the file's #define default."""
    for flag in flags:
        if flag.startswith(f"-DELU7_{name}="):
            return flag.split("=", 1)[1]
    text = source() if text is None else text
    return re.search(rf"#define ELU7_{name} (\w+)", text).group(1)


def formula_of(flags, dtype: str, text: str | None = None) -> str:
    """The fast formula a build uses on a dtype ("expm1f" for a build that never uses one)."""
    text = source() if text is None else text
    if knob(flags, "CHECK", text) == "0":
        return "expm1f"
    chosen = knob(flags, "FORMULA", text)
    return choices(text).get((dtype, chosen), chosen)


def checked(flags, text: str | None = None) -> bool:
    """Whether a build claims bit-exactness (every CHECK but 2, the unchecked ablation)."""
    return knob(flags, "CHECK", text) != "2"
