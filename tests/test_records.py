"""The re-record (python -m elu_study records): which records are due, read from their fingerprints."""

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from elu_study.core import build, fingerprint, record
from elu_study.jobs import records


@pytest.fixture()
def results(tmp_path):
    """A copy of the committed records, to stamp at will."""
    shutil.copytree(record.RESULTS_DIR, tmp_path, dirs_exist_ok=True)
    return tmp_path


def fingerprint_of(path):
    return json.loads(path.read_text())["fingerprint"]


def set_fingerprint(path, value):
    """Set a record's fingerprint; None takes it away, as a record is before its stage is stamped."""
    rec = json.loads(path.read_text())
    if value is None:
        rec.pop("fingerprint")  # there is one to take away
    else:
        rec["fingerprint"] = value
    path.write_text(record.dumps(rec) + "\n")


def make_current(results, name):
    """Fingerprint a stage's record as this tree gives it (the same builds, as they are now)."""
    stage = records.BY_NAME[name]
    path = record.record_path(job=stage.job, results_dir=results)
    held = json.loads(path.read_text()).get("fingerprint") or {  # a failed run's record holds none: the main one's
        "toolchain": fingerprint_of(record.record_path(results_dir=results))["toolchain"], "builds": {}}
    now = fingerprint.fingerprint(stage.roots, stage.files, [], held["toolchain"], job=stage.job)
    builds = {key: fingerprint.build_digest(*fingerprint.parse_build_key(key)) for key in held["builds"]}
    set_fingerprint(path, {**now, "builds": builds})


def runs(results, tools=None, **kw):
    return {s.name: run for s, _, run in records.plan(record.REFERENCE_GPU, tools, results_dir=results, **kw)}


def why(results, tools=None, **kw):
    return {s.name: reasons for s, reasons, _ in records.plan(record.REFERENCE_GPU, tools, results_dir=results, **kw)}


def test_every_committed_record_holds_a_fingerprint_of_its_stage():
    """Each record is stamped, but a test suite's run that failed: the runner leaves it unstamped, so it is due."""
    for stage in records.STAGES:
        if stage.job:
            held = stage.held(record.REFERENCE_GPU)
            if not held and stage.job == "tests":
                counts = record.load(job="tests")["counts"]
                assert counts["failed"] or counts["error"], "a passing suite's record without its fingerprint"
                assert stage.due(record.REFERENCE_GPU, None), "an unstamped record read as current"
                continue
            assert held and set(held) >= {"code", "catalogue", "builds", "toolchain"}, stage.name
            assert held["toolchain"]["gpu"] and held["toolchain"]["torch"], stage.name


def test_a_record_whose_inputs_changed_is_due_and_says_which(results):
    for name in ("study", "launch", "sixteen"):
        make_current(results, name)
    main = record.record_path(job="study", results_dir=results)
    sixteen = record.record_path(job="sixteen", results_dir=results)
    module = next(iter(fingerprint_of(sixteen)["code"]))
    held = fingerprint_of(main)
    set_fingerprint(main, {**held, "builds": {**held["builds"], "2_float4": "0" * 16}})
    changed = fingerprint_of(sixteen)
    set_fingerprint(sixteen, {**changed, "code": {**changed["code"], module: "0" * 16}})
    reasons = why(results)
    assert reasons["study"] == ["build 2_float4"] and reasons["sixteen"] == [f"code {module} (changed)"]
    assert reasons["launch"] == []
    plan = runs(results)
    assert plan["study"] and plan["sixteen"] and not plan["launch"] and plan["build"]
    assert all(runs(results, force=True).values())
    assert list(plan) == [s.name for s in records.STAGES]  # in STAGES order


def test_the_toolchain_is_compared_where_a_gpu_runs_the_plan(results):
    make_current(results, "launch")
    tools = fingerprint_of(record.record_path(job="launch", results_dir=results))["toolchain"]
    assert why(results, tools)["launch"] == []
    reasons = why(results, {**tools, "torch": "9.9.9"})
    assert reasons["launch"] == [f"toolchain torch {tools['torch']} -> 9.9.9"] and all(
        r for name, r in reasons.items() if records.BY_NAME[name].job)


def test_the_readme_and_notebooks_are_made_again_before_the_suite_and_only_for_it(results):
    """The suite checks the README and the notebooks against the records: a run that measures any record and then
    the tests makes both again in between; one that leaves the tests current does not, nor does a run of one job."""
    for stage in records.STAGES:
        if stage.job:
            make_current(results, stage.name)
    sixteen = record.record_path(job="sixteen", results_dir=results)
    set_fingerprint(sixteen, None)
    plan = runs(results)
    assert plan["sixteen"] and plan["build"] and not plan["tests"]
    assert not plan["report"] and not plan["notebooks"]  # the tests are current: nothing to check them against
    set_fingerprint(record.record_path(job="tests", results_dir=results), None)
    plan = runs(results)
    assert plan["report"] and plan["notebooks"] and plan["tests"]
    order = [s.name for s in records.STAGES]
    assert order.index("sanitize") < order.index("report") < order.index("notebooks") < order.index("tests")
    assert set(runs(results, names=["tests"])) == {"build", "report", "notebooks", "tests"}
    assert set(runs(results, names=["launch"])) == {"build", "launch"}


def test_a_missing_record_runs_and_an_unknown_stage_is_refused(results, capsys):
    record.record_path(job="launch", results_dir=results).unlink()
    assert why(results)["launch"] == ["no record"] and runs(results)["launch"] is True
    with pytest.raises(SystemExit):
        records.main(["nonsense"])
    assert "unknown stages" in capsys.readouterr().err


def test_a_stage_that_ran_is_fingerprinted_from_its_build_log(results, tmp_path, monkeypatch):
    """After a stage, its record holds the builds its processes logged and this machine's toolchain: it is
    current for that toolchain, and an edit of a logged build's kernel makes it due."""
    log = tmp_path / "builds.jsonl"
    log.write_text(json.dumps({"variant": "2_float4", "flags": [], "cpp_flags": []}) + "\n" +
                   json.dumps({"variant": "2_float4", "flags": [], "cpp_flags": []}) + "\n")
    tools = {"gpu": "NVIDIA H200", "driver": "1", "cuda_runtime": "13.0", "torch": "2.11.0+cu130"}
    stage = records.BY_NAME["launch"]
    records.stamp(stage, record.REFERENCE_GPU, log, tools, results)
    held = fingerprint_of(record.record_path(job="launch", results_dir=results))
    assert held["builds"] == {"2_float4": fingerprint.build_digest("2_float4")} and held["toolchain"] == tools
    assert stage.due(record.REFERENCE_GPU, tools, results) == []
    monkeypatch.setattr(fingerprint, "build_digest", lambda v, f=(), c=(): "changed")
    assert stage.due(record.REFERENCE_GPU, tools, results) == ["build 2_float4"]


def test_the_plan_says_how_long_each_stage_last_ran_and_what_running_the_due_ones_costs(results, tmp_path):
    """A stage's record keeps how long the stage ran (the runner's stamp); --plan adds up those of the stages it
    would run and names the ones with no timing, so a GPU session can be planned from it."""
    log = tmp_path / "builds.jsonl"
    log.write_text("")
    tools = {"gpu": "NVIDIA H200", "driver": "1", "cuda_runtime": "13.0", "torch": "2.11.0+cu130"}
    for name, seconds in (("launch", 61.04), ("sizes", 104.0)):
        records.stamp(records.BY_NAME[name], record.REFERENCE_GPU, log, tools, results, seconds=seconds)
    assert fingerprint_of(record.record_path(job="launch", results_dir=results))["seconds"] == 61.0
    rows = records.plan(record.REFERENCE_GPU, None, ["launch", "sizes"], force=True, results_dir=results)
    said = records.lines(rows, record.REFERENCE_GPU, results)
    assert any(line.split()[:2] == ["launch", "runs"] and "(last run 61 s)" in line for line in said)
    assert said[-1] == "  to run: about 165 s of stages, plus build (no timing recorded)"
    record.check_schema(json.loads(record.record_path(job="sizes", results_dir=results).read_text()), "sizes", "x")


def test_until_counts_a_stage_never_run_on_this_gpu_at_the_reference_gpu_s_time(results, tmp_path):
    """--until starts no stage that would run past it: one this GPU has no timing of is expected to take what it took
    on the reference GPU (a cold H100 once started the beyond job 70 s before its call's end, and lost it); one it
    has a timing of, its own. --plan says the same, and whose time it is."""
    log = tmp_path / "builds.jsonl"
    log.write_text("")
    tools = {"gpu": "NVIDIA H200", "driver": "1", "cuda_runtime": "13.0", "torch": "2.11.0+cu130"}
    h100, study = "NVIDIA H100 80GB HBM3", records.BY_NAME["study"]
    records.stamp(study, record.REFERENCE_GPU, log, tools, results, seconds=208.0)
    assert records.last_run(study, "NVIDIA A100-SXM4-80GB", results) == (208.0, record.REFERENCE_GPU)
    assert record.record_path(h100, "study", results).exists()  # the H100's main record: its own time wins
    records.stamp(study, h100, log, {**tools, "gpu": h100}, results, seconds=300.0)
    assert records.last_run(study, h100, results) == (300.0, record.slug(h100))
    rows = records.plan("NVIDIA A100-SXM4-80GB", None, ["study"], force=True, results_dir=results)
    assert "(last run 208 s on nvidia-h200)" in records.lines(rows, "NVIDIA A100-SXM4-80GB", results)[1]
    assert records.last_run(records.BY_NAME["build"], h100, results) is None  # a stage with no record of its own


def test_the_tests_stage_runs_one_file_per_worker_under_one_seed_per_run(monkeypatch):
    """The suite's workers (pytest-xdist) share the run's hypothesis seed, given on the command line so that the
    record's rerun_with repeats it; each run draws its own; every process of a stage logs its builds to one file."""
    calls = []
    monkeypatch.setattr(records.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(records.torch.cuda, "get_device_name", lambda *a: record.REFERENCE_GPU)
    monkeypatch.setattr(records.hardware, "provenance", lambda: {"gpu": "NVIDIA H200", "torch": "x"})
    monkeypatch.setattr(records, "stamp", lambda *a, **k: None)
    done = subprocess.Popen(["true"])  # each stage's process: one that ran and exited 0
    done.wait()
    monkeypatch.setattr(records.subprocess, "Popen", lambda argv, **kw: calls.append((argv, kw["env"])) or done)
    assert records.main(["tests", "--force"]) == 0
    assert records.main(["tests", "--force"]) == 0
    steps = [argv[2:4] for argv, _ in calls]  # each run: the builds, the README, the notebooks, then the suite
    assert steps == [["elu_study", "records"], ["elu_study", "report"], ["elu_study", "notebooks"], ["pytest", "-q"]] * 2
    # each stage's processes log their builds to one file of its own
    assert [Path(env[build.BUILD_LOG_ENV]).name for _, env in calls] == [
        "build.jsonl", "report.jsonl", "notebooks.jsonl", "tests.jsonl"] * 2
    seeds = []
    for argv, _ in calls:
        if argv[2] != "pytest":
            continue
        assert argv[1:3] == ["-m", "pytest"]
        assert re.search(r" -n [1-9]\d* --dist loadfile ", " ".join(argv) + " ")
        (seed,) = (int(a.removeprefix("--hypothesis-seed=")) for a in argv if a.startswith("--hypothesis-seed="))
        seeds.append(seed)
    assert len(seeds) == 2 and seeds[0] != seeds[1]


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


def records_read(text: str) -> dict[str, str]:
    """The record files a notebook's closing "Records read" line names, each with the days it gives."""
    line = next((ln for ln in text.splitlines() if ln.startswith("Records read")), "")
    return dict(re.findall(r"results/(\S+?\.json) \(([^)]*)\)", line))


def check_names_its_records(text: str, results_dir=record.RESULTS_DIR) -> None:
    """The property, for one notebook's outputs (raises AssertionError): every record a "Data source" line names
    is among those read, and each record read is given with the days its record says it was measured."""
    read = records_read(text)
    assert read, "no Records read line, or it names no record"
    for file in re.findall(r"Data source: results/(\S+?\.json)", text):
        assert file in read, f"{file} is shown but not in the Records read line"
    for file, days in read.items():
        measured = ", ".join(record.dates_of(json.loads((results_dir / file).read_text())))
        assert days == measured, f"{file}: the line says {days}, the record {measured}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_names_each_record_it_shows_and_the_days_it_was_measured(path):
    check_names_its_records(outputs(path))


def test_the_check_notices_a_notebook_that_misdates_or_leaves_out_a_record(tmp_path):
    """The check fails where the line gives another day than the record's, where a Data source names a record the
    line leaves out, or where no record is named."""
    for f, day in (("a.json", "2026-12-01"), ("b.json", "2026-12-03")):
        (tmp_path / f).write_text(json.dumps({"provenance": {"date_utc": f"{day}T10:00:00+00:00", "commit": "1111111"}}))
    record.SHOWN.clear()
    record.SHOWN.update({"a.json": ["2026-12-01"], "b.json": ["2026-12-03"]})
    line = str(record.shown())
    check_names_its_records(line, tmp_path)
    with pytest.raises(AssertionError, match="the line says 2026-12-02"):
        check_names_its_records(line.replace("2026-12-01", "2026-12-02"), tmp_path)
    with pytest.raises(AssertionError, match="not in the Records read line"):
        check_names_its_records(line + "\nData source: results/c.json (G, 2026-12-01)", tmp_path)
    record.SHOWN.clear()
    with pytest.raises(AssertionError, match="names no record"):
        check_names_its_records(str(record.shown()), tmp_path)


def test_the_closing_line_names_the_builds_changed_since_the_records(monkeypatch):
    """After the Records read line, the kernel files whose builds no longer match what a record read holds (a
    digest differs from the build's now), and the records with no fingerprint to tell; nothing where all match."""
    current = fingerprint.build_key("2_float4")
    monkeypatch.setattr(record, "SHOWN", {"a.json": ["2026-12-01"], "b.json": ["2026-12-03"]})
    monkeypatch.setattr(record, "BUILDS", {"a.json": {current: fingerprint.build_digest("2_float4")},
                                           "b.json": {current: fingerprint.build_digest("2_float4"),
                                                      "6_beyond_copy": "earlier"}})
    line = str(record.shown())
    assert line.endswith("header it includes): `6_beyond_copy`; these records hold the earlier builds' numbers.")
    record.BUILDS["b.json"]["6_beyond_copy"] = fingerprint.build_digest("6_beyond_copy")
    assert "changed since" not in str(record.shown())
    record.BUILDS["a.json"] = None  # a record without a fingerprint
    assert str(record.shown()).endswith("No fingerprint in results/a.json: whether it is current is unknown.")


def test_only_stages_that_measure_no_time_run_side_by_side():
    """accuracy and sanitize (checks, no time or counter) form one group, the README and notebooks made from them
    another, after them; each timing stage runs alone."""
    groups = [[s.name for s in g] for g in records.batches(list(records.STAGES))]
    together = [["accuracy", "sanitize"], ["report", "notebooks"]]
    assert [g for g in groups if len(g) > 1] == together
    assert all(len(g) == 1 for g in groups if g not in together)
    assert [n for g in groups for n in g] == [s.name for s in records.STAGES]
    timing = [records.BY_NAME[n] for n in ("study", "model", "profile")]
    assert records.batches(timing) == [[s] for s in timing]


def test_a_group_runs_at_once_and_names_the_stage_that_failed(capsys):
    sleep = "import time; time.sleep(1.5)"
    group = [records.Stage("a", ("timeit", "-n1", "-r1", sleep), None, beside="g"),
             records.Stage("b", ("timeit", "-n1", "-r1", sleep), None, beside="g"),
             records.Stage("c", ("timeit", "-n1", "-r1", "raise SystemExit(3)"), None, beside="g")]
    start = time.monotonic()
    assert records.run_side_by_side(group, record.REFERENCE_GPU, {}) == ["c"]
    assert time.monotonic() - start < 2.9  # one after the other: 3 s and more
    said = capsys.readouterr().out
    assert "=== c: exit 1" in said  # timeit reports the raise, exit 1
    # each one's output under its own name, not interleaved with the others'
    assert said.index("=== c's output:\nTraceback") < said.index("SystemExit: 3") < said.index("=== c: exit 1")
    assert said.count("'s output:\n1 loop, best of 1") == 2


def test_without_a_gpu_the_plan_reads_the_records_of_the_gpu_named(capsys, monkeypatch):
    """--gpu picks whose committed records --plan reads: each stage's last run is that GPU's record's."""
    monkeypatch.setattr(records.torch.cuda, "is_available", lambda: False)  # a GPU here would name itself
    other = next(g for g in record.gpus() if g != record.REFERENCE_GPU)
    assert records.main(["--plan", "--gpu", other]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"records of {other} ")
    seconds = record.held_fingerprint(other, "study")["seconds"]
    assert re.search(rf"^  study +\w+ +\(last run {seconds:.0f} s\)", out, re.MULTILINE), out
    assert seconds != record.held_fingerprint(record.REFERENCE_GPU, "study")["seconds"]  # not the reference's
    with pytest.raises(SystemExit):  # a GPU with no main record: named, with those there are, not an empty plan
        records.main(["--plan", "--gpu", "no-such-gpu"])
    assert "recorded: nvidia-h200" in capsys.readouterr().err


def test_the_gpu_script_runs_nothing_on_a_gpu_it_was_not_asked_for(tmp_path):
    """ONLY_ON=<GPU>: a device call that comes on another GPU (or none) exits 3 before any stage, so it spends only its
    start; without it the same call would measure that GPU's records (a cold H100 once spent 600 s so). A name no GPU
    has, so that on the H200's test run too the script stops there (with "H200" it would run the stage)."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "h200_record.sh"
    done = subprocess.run(["bash", str(script), "records"], env={"PATH": "/usr/bin:/bin", "ONLY_ON": "no such GPU",
                                                                   "OUT": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "nothing run" in done.stderr, done.stderr
    assert not list(tmp_path.iterdir())  # no stage ran, nothing packed
