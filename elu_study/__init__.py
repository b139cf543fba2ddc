"""elu-study: a custom CUDA ELU, step by step, measured against the memory floor.

The names of ``__all__`` load on first use (PEP 562), so ``import elu_study`` imports no torch."""

import importlib

__all__ = ["ELU", "check_variant", "compile_variant", "known_variants", "swap_elu", "time_variant"]
_HOMES = {"compile_variant": "elu_study.core.build", "known_variants": "elu_study.core.build",
          "check_variant": "elu_study.core.variant", "time_variant": "elu_study.core.variant",
          "ELU": "elu_study.pytorch.nn", "swap_elu": "elu_study.pytorch.nn"}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'elu_study' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *__all__])
