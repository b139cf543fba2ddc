"""Fresh processes: a margin of a fraction of a percent must survive a new process to count. Each one
(``python -m elu_study.core.processes PATH ROUNDS NAME...``) writes its medians, x_copy and x_roof to a scratch file."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tqdm import tqdm

from elu_study.core.entries import ENTRIES
from elu_study.core.harness import measure


def repeat(path: Path, rounds: int, names) -> int:
    """One fresh process: ``names`` timed in interleaved rounds (the job checked them), the medians to ``path``."""
    timed = measure([ENTRIES[n] for n in names], rounds=rounds, check=False, sass=False)
    path.write_text(json.dumps({r["name"]: {"median_ms": r["timing"]["median_ms"], "x_copy": r["x_copy"], "x_roof":
                                            r.get("x_roof"), "round_medians_ms": r["timing"]["round_medians_ms"]}
                                for r in timed["rows"]}))
    return 0


def fresh_processes(names, processes: int, rounds: int = 3) -> list[dict]:
    """``names`` timed in ``processes`` new Python processes, one after another."""
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in tqdm(range(processes), desc="fresh processes", unit="process"):
            path = Path(tmp, f"repeat{k}.json")
            subprocess.run([sys.executable, "-m", "elu_study.core.processes", str(path), str(rounds), *names],
                           check=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
            runs.append(json.loads(path.read_text()))  # the scratch file, not a record
    return runs


if __name__ == "__main__":
    sys.exit(repeat(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]))
