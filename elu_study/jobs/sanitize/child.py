"""The process compute-sanitizer watches: ``python -m elu_study.jobs.sanitize.child SPEC``.

SPEC is a JSON file ``{"builds": [library_entry, ...]}``; the child loads each library (compiling nothing),
calls each op on small inputs and prints ``CHILD_OK`` once every result was right."""

import json
import sys
from pathlib import Path

import torch  # also what a build's extension links against: register needs libtorch loaded

from elu_study.core.build import register
from elu_study.core.check import ATOL, RTOL
from elu_study.core.ops import ops_of
from elu_study.jobs.sanitize import CHILD_OK

# Lengths around every vector (4) and block (256, 512, 1024) boundary, each ending at the end of its allocation.
SMALL_LENGTHS = (0, 1, 2, 3, 4, 5, 7, 8, 255, 257, 1023, 1025, 3 * 4096 + 1)
LARGE_LENGTH = (1 << 22) + 5  # past one pass of the seed's grid-stride launch (1152 x 512 x 4 elements)
RTOL16 = 2.0 ** -6  # two 16-bit ulps: the host's 16-bit reference may round its own exp differently


def dtypes_of(entry: dict, op) -> list[torch.dtype]:
    """The dtypes the spec says an op of a build takes (``library_entry``); float32 where it says none."""
    return [getattr(torch, name) for name in entry.get("dtypes", {}).get(op.name, ["float32"])]


def exercise(fn, op, device, compare: bool = True, dtype: torch.dtype = torch.float32) -> int:
    """Call one op on the small inputs, checking each result on the host (so the tools watch only the op's own
    kernels); ``compare=False`` (a copy kernel) still reads every element back. Returns the number of calls."""
    gen, calls = torch.Generator().manual_seed(0), 0

    def tensor(n: int, offset: int = 0):  # n values ending at the end of their allocation, offset elements in
        return torch.randn(n + offset, generator=gen).mul_(4).to(device=device, dtype=dtype)[offset:]

    empty = lambda n: torch.empty(n, device=device, dtype=dtype)

    def call(inputs, alpha, **out):
        nonlocal calls
        expected = op.expected([x.detach().cpu().clone() for x in inputs], alpha)
        result = fn(*inputs, alpha, **out)
        if tuple((got := result.cpu()).shape) != tuple(expected.shape):  # reads every element (initcheck)
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
        for off in (0, 1) if op.in_place is not None else ():  # in place, aligned and not
            inputs = [tensor(n, off) for _ in range(k)]
            call(inputs, alpha, out=inputs[op.in_place])
        call([tensor(2 * n)[::2] for _ in range(k)], alpha, out=empty(n))  # strided: the binding copies it
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
    device, total = torch.device("cuda", torch.cuda.current_device()), 0
    for entry in spec["builds"]:
        module = register(Path(entry["library"]), entry["module"], entry["module"])  # the binding: from the disk cache
        if not (ops := ops_of(module)):
            raise RuntimeError(f"{entry['id']}: the module registers none of the ops elu_study.core.ops knows")
        for op in ops:
            # A copy kernel's elu is not ELU; its build's elu_backward (kernels/common/backward.cu) is the real one.
            compare = entry.get("computes_elu", True) or op.name != "elu"
            total += sum(exercise(getattr(module, op.name), op, device, compare, d) for d in dtypes_of(entry, op))
        print(f"elu-study sanitize child: {entry['id']} ok", flush=True)
    print(f"{CHILD_OK}: {total} calls over {len(spec['builds'])} build(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(child(sys.argv[1]))
