"""elu-study: a custom CUDA ELU, step by step, measured against the memory floor."""

from .build import compile_variant, known_variants

__all__ = ["compile_variant", "known_variants"]
