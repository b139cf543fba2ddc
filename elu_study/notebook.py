"""What every notebook does: say where its numbers come from, show a kernel, inspect, measure, compare.

On a GPU the numbers are measured live; without one, kernels are still compiled and
inspected here, and the numbers come from the recorded run in results/.
"""

from __future__ import annotations

import copy

from IPython.display import Markdown, display

from . import results
from .build import build_spec, compile_variant
from .check import describe
from .sass import inspect_variant
from .study import ENTRIES, KINDS, annotate, measure


def gpu_available() -> bool:
    import torch

    return torch.cuda.is_available()


class Study:
    """One notebook's view of the study: live on a GPU, recorded without one."""

    def __init__(self, reference_gpu: str = results.REFERENCE_GPU):
        self.live = gpu_available()
        self.recorded = None if self.live else results.load(reference_gpu)
        if self.live:
            import torch

            print(f"Data source: live run on {torch.cuda.get_device_name()}")
        else:
            p = self.recorded["provenance"]
            print(
                f"Data source: NO GPU HERE. Kernels are compiled and inspected live; every number below is the "
                f"recorded run from results/{reference_gpu}.json ({p['gpu']}, {p['date_utc'][:10]})."
            )

    def sm_count(self) -> int:
        """Multiprocessors of the GPU the numbers come from."""
        if self.live:
            import torch

            return torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        return self.recorded["provenance"]["sm_count"]

    # -- kernels -----------------------------------------------------------------------------
    @staticmethod
    def show_kernel(name: str):
        """The kernel file as it is in kernels/, never a pasted copy."""
        path = build_spec(name).source_path
        return Markdown(f"`kernels/{path.name}`\n```cuda\n{path.read_text()}```")

    @staticmethod
    def inspect(name: str, flags: tuple[str, ...] = ()):
        """Compile (or reuse the build) and print what the SASS shows."""
        report = inspect_variant(compile_variant(name, extra_cuda_cflags=list(flags)))
        print(report.summary())
        return report

    # -- numbers -----------------------------------------------------------------------------
    def measure(self, *names: str, trials: int = 3) -> dict:
        """Check and time these entries and copy_ (the roof): live, or from the recorded run."""
        wanted = [*names, "copy_"] if "copy_" not in names else list(names)
        if self.live:
            return measure([ENTRIES[n] for n in wanted], trials=trials)
        record = copy.deepcopy(self.recorded)
        record["rows"] = [results.row(record, n) for n in wanted]
        return annotate(record)

    @staticmethod
    def table(record: dict, kinds=KINDS) -> None:
        display(Markdown(results.markdown(results.frame(record, kinds))))

    @staticmethod
    def verdicts(record: dict) -> None:
        """Correctness of each checked entry, in words."""
        for r in record["rows"]:
            if r["check"] is not None:
                print(f"{r['name']}: {describe(r['check'])}")

    @staticmethod
    def compare(record: dict, before: str, after: str) -> None:
        """How much a step moved the time, and what is left to the roof and the floor."""
        b, a = results.row(record, before), results.row(record, after)
        tb, ta = b["timing"]["median_ms"], a["timing"]["median_ms"]
        print(f"{before} -> {after}: {tb:.3f} ms -> {ta:.3f} ms ({tb / ta:.2f}x as fast)")
        print(f"  {after} is {ta / record['roof_ms']:.3f}x the copy_ roof ({record['roof_ms']:.3f} ms)")
        if record["floor_ms"]:
            print(f"  and runs at {100 * record['floor_ms'] / ta:.1f} % of datasheet bandwidth (floor {record['floor_ms']:.3f} ms)")
        spread = [abs(r["timing"]["round_medians_ms"][0] - r["timing"]["round_medians_ms"][-1]) for r in (a, b)]
        print(f"  run-to-run noise (difference of two rounds' medians): {max(spread):.3f} ms")
