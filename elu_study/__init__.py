"""elu-study: a custom CUDA ELU, step by step, measured against the memory floor."""

from elu_study.core.build import compile_variant, known_variants

__all__ = ["ELU", "compile_variant", "known_variants", "swap_elu"]


def __getattr__(name: str):
    # ELU and swap_elu need torch (and register the custom ops); import them only when asked for,
    # so that importing elu_study stays cheap.
    if name in ("ELU", "swap_elu"):
        from elu_study.pytorch import nn  # lazy: importing it registers the torch.library ops

        return getattr(nn, name)
    raise AttributeError(f"module 'elu_study' has no attribute {name!r}")
