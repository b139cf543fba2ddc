"""The one-commit re-record (python -m elu_study records): which stages it runs, read from the records' stamps."""

import fnmatch
import json
import re
import shutil
import subprocess

import pytest

from elu_study.core import hardware, record
from elu_study.jobs import records


@pytest.fixture()
def results(tmp_path):
    """A copy of the committed records, to stamp at will."""
    shutil.copytree(record.RESULTS_DIR, tmp_path, dirs_exist_ok=True)
    return tmp_path


def restamp(path, commit, *keys):
    rec = json.loads(path.read_text())
    node = rec
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = commit
    path.write_text(json.dumps(rec))


def runs(results, commit, **kw):
    return {s.name: run for s, _, run in records.plan(record.REFERENCE_GPU, commit, results_dir=results, **kw)}


def test_a_stage_whose_record_holds_this_commit_is_skipped_and_every_other_runs(results):
    main = record.record_path(job="study", results_dir=results)
    commit = json.loads(main.read_text())["provenance"]["commit"]
    restamp(record.record_path(job="sixteen", results_dir=results), "0000000", "provenance", "commit")
    plan = runs(results, commit)
    assert plan["study"] is False and plan["sixteen"] is True
    assert plan["build"] is True  # it writes no record: always runs (a cached build costs nothing)
    assert all(runs(results, commit, force=True).values())
    assert list(plan) == [s.name for s in records.STAGES]  # in STAGES order


def test_the_readme_and_notebooks_are_made_again_before_the_suite_and_only_for_it(results):
    """The suite checks the README and the notebooks against the records: a run that measures any record and then
    the tests makes both again in between; one that leaves the tests current does not, nor does a run of one job."""
    commit = json.loads(record.record_path(job="study", results_dir=results).read_text())["provenance"]["commit"]
    for job, stamp in (("tests", ("provenance", "commit")), ("model", None)):
        path = record.record_path(job=job, results_dir=results)
        if stamp:
            restamp(path, commit, *stamp)
        else:
            rec = json.loads(path.read_text())
            for part in rec["parts"].values():
                part["commit"] = commit
            path.write_text(json.dumps(rec))
    for path in results.glob("*.json"):  # every record at this commit but the sixteen record
        rec = json.loads(path.read_text())
        if "provenance" in rec and rec["provenance"].get("commit"):
            rec["provenance"]["commit"] = commit
        if "backward" in rec:
            rec["backward"]["provenance"]["commit"] = commit
        path.write_text(json.dumps(rec))
    restamp(record.record_path(job="sixteen", results_dir=results), "0000000", "provenance", "commit")
    plan = runs(results, commit)
    assert plan["sixteen"] and plan["build"] and not plan["tests"]
    assert not plan["report"] and not plan["notebooks"]  # the tests are current: nothing to check them against
    restamp(record.record_path(job="tests", results_dir=results), "0000000", "provenance", "commit")
    plan = runs(results, commit)
    assert plan["report"] and plan["notebooks"] and plan["tests"]
    order = [s.name for s in records.STAGES]
    assert order.index("sanitize") < order.index("report") < order.index("notebooks") < order.index("tests")
    assert set(runs(results, commit, names=["tests"])) == {"build", "report", "notebooks", "tests"}
    assert set(runs(results, commit, names=["launch"])) == {"build", "launch"}


def test_the_backward_stage_reads_its_own_stamp_and_the_model_stage_every_part(results):
    main = record.record_path(job="study", results_dir=results)
    commit = json.loads(main.read_text())["provenance"]["commit"]
    restamp(main, "1111111", "backward", "provenance", "commit")
    assert runs(results, commit)["backward"] is True and runs(results, commit)["study"] is False
    model = record.record_path(job="model", results_dir=results)
    rec = json.loads(model.read_text())
    for part in rec["parts"].values():
        part["commit"] = "2222222"
    model.write_text(json.dumps(rec))
    assert runs(results, "2222222")["model"] is False
    rec["parts"]["host"]["commit"] = "3333333"  # one part of another commit: the record is not of one commit
    model.write_text(json.dumps(rec))
    assert runs(results, "2222222")["model"] is True


def test_a_missing_record_runs_and_an_unknown_stage_is_refused(results, capsys):
    record.record_path(job="launch", results_dir=results).unlink()
    assert runs(results, "4444444")["launch"] is True
    with pytest.raises(SystemExit):
        records.main(["nonsense"])
    assert "unknown stages" in capsys.readouterr().err


def test_records_are_stamped_with_the_commit_of_the_measuring_code_not_of_later_prose(monkeypatch):
    """Every file changed since the stamp's commit is presentation (templates, figures, notebook helpers, the
    report) or outside the measuring code (records, notebooks, tests, README); the stamp's commit itself changed
    measuring code."""
    monkeypatch.delenv("ELU_STUDY_COMMIT", raising=False)
    root = record.RESULTS_DIR.parent
    git = shutil.which("git")
    stamp = hardware.code_commit()
    if not git or not stamp:
        pytest.skip("no git history here")

    def files(*args):
        return subprocess.run([git, "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.split()

    def measuring(path):
        inside = any(path == p or path.startswith(p + "/") for p in ("kernels", "elu_study", "scripts", "pyproject.toml"))
        return inside and not any(fnmatch.fnmatch(path, p) or path.startswith(p + "/") for p in hardware.PRESENTATION)

    assert not [f for f in files("diff", "--name-only", stamp, "HEAD") if measuring(f)]
    assert [f for f in files("show", "--name-only", "--format=", stamp) if measuring(f)]


# -- every notebook names the records it shows, and says when they are of different commits --------------------
NOTEBOOKS = sorted((record.RESULTS_DIR.parent / "notebooks").glob("*.ipynb"))


def outputs(path) -> str:
    """Every text a committed notebook's cells printed or displayed, in order."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            found.append("".join(out.get("text", "")) + "".join(data.get("text/markdown", data.get("text/plain", ""))))
    return "\n".join(found)


def shown_table(text: str) -> dict[str, list[str]]:
    """The "Records shown" table of a notebook's output: {record file: its commits}."""
    table = text[text.index("**Records shown in this notebook**"):]
    rows = re.findall(r"^\| results/(\S+) \| [^|]+ \| [^|]+ \| [^|]+ \| ([^|]+) \|$", table, flags=re.M)
    return {file: re.findall(r"[0-9a-f]{7,}", commits) for file, commits in rows}


def check_names_its_records(text: str) -> None:
    """The property, for one notebook's outputs (raises AssertionError)."""
    assert "**Records shown in this notebook**" in text, "no Records shown cell"
    table = shown_table(text)
    assert table, "the Records shown table is empty"
    for file, commit in re.findall(r"Data source: results/(\S+?)[,.]? .*?commit (\w+)", text):
        assert commit in table.get(file, []), f"{file} at {commit} is shown but not in the table"
    commits = {c for cs in table.values() for c in cs}
    if len(commits) > 1:
        assert "RECORDS OF DIFFERENT COMMITS" in text, f"records of {sorted(commits)} without saying so"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_names_each_record_it_shows_and_says_when_their_commits_differ(path):
    check_names_its_records(outputs(path))


def test_the_check_notices_a_notebook_that_hides_mixed_commits():
    """The same notebook text with its mixed-commit line taken out, or its table emptied, fails."""
    rows = {"a.json": ["1111111"], "b.json": ["2222222"]}
    record.SHOWN.clear()
    record.SHOWN.update({f: {"file": f, "job": "study", "gpu": "G", "date": "d", "commits": c} for f, c in rows.items()})
    mixed = str(record.shown())
    check_names_its_records(mixed)
    with pytest.raises(AssertionError, match="without saying so"):
        check_names_its_records(mixed.replace("RECORDS OF DIFFERENT COMMITS", "records"))
    with pytest.raises(AssertionError, match="not in the table"):
        check_names_its_records(mixed + "\nData source: results/c.json, measured ... (2026-12-01, commit 3333333)")
    record.SHOWN.clear()
    with pytest.raises(AssertionError, match="empty"):
        check_names_its_records(str(record.shown()))


def test_the_tests_stage_runs_one_file_per_worker_under_one_seed_per_run(monkeypatch):
    """The suite's workers (pytest-xdist) share the run's hypothesis seed, given on the command line so that the
    record's rerun_with repeats it; each run draws its own."""
    calls = []
    monkeypatch.setattr(records.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(records.torch.cuda, "get_device_name", lambda *a: record.REFERENCE_GPU)
    monkeypatch.setattr(records.hardware, "code_commit", lambda: "abcdef0")  # before subprocess.run is replaced
    monkeypatch.setattr(records.subprocess, "run",
                        lambda argv, **kw: calls.append(argv) or subprocess.CompletedProcess(argv, 0))
    assert records.main(["tests", "--force"]) == 0
    assert records.main(["tests", "--force"]) == 0
    steps = [argv[2:4] for argv in calls]  # each run: the builds, the README, the notebooks, then the suite
    assert steps == [["elu_study", "records"], ["elu_study", "report"], ["elu_study", "notebooks"], ["pytest", "-q"]] * 2
    calls = [argv for argv in calls if argv[2] == "pytest"]
    seeds = []
    for argv in calls:
        assert argv[1:3] == ["-m", "pytest"]
        assert re.search(r" -n [1-9]\d* --dist loadfile ", " ".join(argv) + " ")
        (seed,) = (int(a.removeprefix("--hypothesis-seed=")) for a in argv if a.startswith("--hypothesis-seed="))
        seeds.append(seed)
    assert len(calls) == 2 and seeds[0] != seeds[1]
