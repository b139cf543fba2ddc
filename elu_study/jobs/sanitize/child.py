"""The process compute-sanitizer watches: ``python -m elu_study.jobs.sanitize.child SPEC``.

SPEC is a JSON file ``{"builds": [builds.library_entry, ...]}``. The child loads each build's shared
library (it compiles nothing) and calls each of its ops (``elu_study.core.ops``) on small inputs;
it prints ``runner.CHILD_OK`` once every call was made and every result was right.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

import torch  # also what a build's extension links against: load_library needs libtorch loaded

from elu_study.core.check import ATOL, RTOL
from elu_study.core.ops import ops_of
from elu_study.jobs.sanitize.runner import CHILD_OK

# Lengths around every vector (4) and block (256, 512, 1024 elements) boundary a step has, and the
# smallest: each with its last element at the end of an allocation.
SMALL_LENGTHS = (0, 1, 2, 3, 4, 5, 7, 8, 255, 257, 1023, 1025, 3 * 4096 + 1)
LARGE_LENGTH = (1 << 22) + 5  # past one pass of the seed's grid-stride launch (1152 x 512 x 4 elements)
_OMITTED = object()


def load_library(name: str, path: str):
    """A build's extension module, imported from its shared library by path (torch, which it links, is loaded)."""
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


RTOL16 = 2.0 ** -6  # two 16-bit ulps: the host's 16-bit reference may round its own exp differently


def dtypes_of(entry: dict, op) -> list[torch.dtype]:
    """The dtypes the spec says an op of a build takes (``builds.library_entry``); float32 where it says none."""
    return [getattr(torch, name) for name in entry.get("dtypes", {}).get(op.name, ["float32"])]


def exercise(fn, op, device, compare: bool = True, dtype: torch.dtype = torch.float32) -> int:
    """Call one op on the small inputs; check every result against PyTorch. Returns the number of calls.

    Inputs are made on the host and copied over, and results are copied back and checked on the host,
    so that the only kernels the tools watch are the op's own (and the binding's copy of a strided
    input): nothing of PyTorch's can put an error in the report. ``compare=False`` (a copy kernel)
    still copies every result back, reading every element."""
    gen = torch.Generator().manual_seed(0)
    calls = 0

    def tensor(n: int, offset: int = 0):  # n values ending at the end of their allocation, offset elements in
        return torch.randn(n + offset, generator=gen).mul_(4).to(device=device, dtype=dtype)[offset:]

    def empty(n: int):
        return torch.empty(n, device=device, dtype=dtype)

    def call(inputs, alpha, out=_OMITTED):
        nonlocal calls
        expected = op.expected([x.detach().cpu().clone() for x in inputs], alpha)
        result = fn(*inputs, alpha) if out is _OMITTED else fn(*inputs, alpha, out=out)
        got = result.cpu()  # reads every element: initcheck sees one never written
        if tuple(got.shape) != tuple(expected.shape):
            raise AssertionError(f"{op.name}: result of shape {tuple(got.shape)} for inputs of {tuple(expected.shape)}")
        rtol = RTOL if dtype == torch.float32 else RTOL16
        if compare and not torch.isclose(got.float(), expected.float(), rtol=rtol, atol=ATOL, equal_nan=True).all():
            raise AssertionError(f"{op.name}: wrong result ({dtype}) for shape {tuple(expected.shape)}, alpha {alpha}")
        calls += 1

    k = len(op.inputs)
    for i, n in enumerate(SMALL_LENGTHS):
        alpha = (1.0, -0.5, 0.0, 1.7)[i % 4]
        call([tensor(n) for _ in range(k)], alpha)  # out allocated by the binding
        call([tensor(n) for _ in range(k)], alpha, out=empty(n))  # exact, never written before
        for x_off, out_off in ((1, 0), (0, 3), (2, 2)):  # misaligned input, output, both
            call([tensor(n, x_off) for _ in range(k)], alpha, out=empty(n + out_off)[out_off:])
        if op.in_place is not None:
            for off in (0, 1):
                inputs = [tensor(n, off) for _ in range(k)]
                call(inputs, alpha, out=inputs[op.in_place])
        strided = [tensor(2 * n)[::2] for _ in range(k)]  # the binding copies it to contiguous
        call(strided, alpha, out=empty(n))
    call([tensor(LARGE_LENGTH) for _ in range(k)], 1.0, out=empty(LARGE_LENGTH))
    if op.in_place is not None:
        inputs = [tensor(LARGE_LENGTH, 1) for _ in range(k)]
        call(inputs, 1.0, out=inputs[op.in_place])
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return calls


def child(spec_path: str) -> int:
    """Every op of every build the spec lists, on this process's GPU; a line per build, CHILD_OK at the end."""
    spec = json.loads(Path(spec_path).read_text())
    device = torch.device("cuda", torch.cuda.current_device())
    total = 0
    for entry in spec["builds"]:
        module = load_library(entry["module"], entry["library"])
        ops = ops_of(module)
        if not ops:
            raise RuntimeError(f"{entry['id']}: the module registers none of the ops elu_study.core.ops knows")
        for op in ops:
            # A copy kernel's elu is not ELU; its build's elu_backward (kernels/common/backward.cu) is the real one.
            compare = entry.get("computes_elu", True) or op.name != "elu"
            fn = getattr(module, op.name)
            total += sum(exercise(fn, op, device, compare, dtype) for dtype in dtypes_of(entry, op))
        print(f"elu-study sanitize child: {entry['id']} ok", flush=True)
    print(f"{CHILD_OK}: {total} calls over {len(spec['builds'])} build(s)", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elu_study.jobs.sanitize.child",
        description="The process compute-sanitizer watches (python -m elu_study sanitize starts it): every op "
                    "of every build SPEC lists, on small inputs, each result checked.")
    parser.add_argument("spec", help='a JSON file {"builds": [{"id", "module", "library", "computes_elu"}, ...]}')
    return child(parser.parse_args(argv).spec)


if __name__ == "__main__":
    sys.exit(main())
