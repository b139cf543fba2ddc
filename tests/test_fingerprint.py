"""A record's fingerprint (elu_study.core.fingerprint): what changes it and what does not."""

import shutil

from elu_study.core import build, entries, fingerprint
from elu_study.core.paths import REPO_ROOT


def test_code_digest_ignores_docstrings_comments_and_layout_but_not_code():
    base = '"""Module."""\nimport os\n\n\ndef f(x):\n    """Doc."""\n    return x + 1  # one\n'
    same = '"""Other words."""\nimport os\n# a comment\n\ndef f(x):\n    return x + 1\n'
    assert fingerprint.code_digest(base) == fingerprint.code_digest(same)
    assert fingerprint.code_digest(base) != fingerprint.code_digest(base.replace("x + 1", "x + 2"))
    assert fingerprint.code_digest(base) != fingerprint.code_digest(base.replace('"""Doc."""', 'print("Doc.")'))



def test_code_digest_reads_the_text_not_this_pythons_unparse():
    """ast.unparse writes some f-strings differently under Python 3.11 and 3.12: a record fingerprinted on the GPU
    machine's Python must read as current under CI's. The digest is the text's, docstrings and comments cut."""
    source = 'def f(w, x):\n    """Doc."""\n    return f"{x!r:>{w}} {\'q\'}"  # café\n'
    assert fingerprint.code_digest(source) == fingerprint._digest("def f(w, x):\n    return f\"{x!r:>{w}} {'q'}\"")
    with_form_feed = 'x = "\x0c"  # a form feed in a string\ny = 1  # one\n'
    assert fingerprint.code_digest(with_form_feed) == fingerprint._digest('x = "\x0c"\ny = 1')

def package(tmp_path):
    """A copy of the package and its catalogue, to edit."""
    shutil.copytree(REPO_ROOT / "elu_study", tmp_path / "elu_study")
    return tmp_path


def test_a_job_s_code_is_its_measuring_imports_not_its_presentation(tmp_path):
    root = package(tmp_path)
    modules = fingerprint.measuring_modules(("elu_study.jobs.launch",), root)
    assert "elu_study.jobs.launch.measure" in modules and "elu_study.core.timing" in modules
    assert "elu_study.jobs.launch.figures" not in modules and "elu_study.core.record" not in modules
    assert not any(m.startswith("elu_study.jobs.study") for m in modules)  # another job's code
    before = fingerprint.code_inputs(("elu_study.jobs.launch",), root=root)
    (root / "elu_study/jobs/launch/figures.py").write_text("raise SystemExit\n")
    template = next((root / "elu_study/templates").rglob("*.j2"))
    template.write_text("changed")
    measure = root / "elu_study/jobs/launch/measure.py"
    measure.write_text(measure.read_text().replace('"""', '"""Reworded. ', 1) + "\n# a comment\n")
    assert fingerprint.code_inputs(("elu_study.jobs.launch",), root=root) == before
    timing = root / "elu_study/core/timing.py"
    timing.write_text(timing.read_text() + "\nEXTRA = 1\n")  # a shared definition no code of the job uses
    assert fingerprint.code_inputs(("elu_study.jobs.launch",), root=root) == before
    measure.write_text(measure.read_text().replace("rounds=rounds, warmup_ms=warmup_ms", "rounds=rounds + 1, "
                                                                                          "warmup_ms=warmup_ms", 1))
    after = fingerprint.code_inputs(("elu_study.jobs.launch",), root=root)
    assert {k for k in after if after[k] != before.get(k)} == {"elu_study.jobs.launch.measure"}


def test_an_edit_voids_the_records_whose_code_reaches_it_and_no_other(tmp_path):
    """Definitions, not modules: an edit of core.timing's sustained protocol voids the study (which runs it), not the
    launch sweep (which times its cells in interleaved rounds only); an edit of what both reach, through a call
    inside time_interleaved, voids both."""
    root = package(tmp_path)
    jobs = {"launch": ("elu_study.jobs.launch",), "study": ("elu_study.jobs.study",)}
    before = {job: fingerprint.code_inputs(roots, root=root) for job, roots in jobs.items()}

    def changed():
        return {job for job, roots in jobs.items() if fingerprint.code_inputs(roots, root=root) != before[job]}

    timing = root / "elu_study/core/timing.py"
    text = timing.read_text()
    timing.write_text(text.replace("n, first = max(1, round(rule.timed_s", "n, first = max(2, round(rule.timed_s"))
    assert changed() == {"study"}
    timing.write_text(text.replace('"runs": int(t.size)', '"runs": int(t.size) + 0'))  # summarize
    assert changed() == {"launch", "study"}
    timing.write_text(text + "\n\ndef unused():\n    return time_sustained\n")
    assert changed() == set()


def test_what_an_import_binds_and_a_module_a_child_process_runs_are_inputs(tmp_path):
    """Two ways code can change unseen by names: an import that binds a name to something else (the same
    definitions reached), and a job's module run as a child process by its name (sanitize's child)."""
    from elu_study.jobs import records

    root = package(tmp_path)
    study, sanitize = ("elu_study.jobs.study",), records.BY_NAME["sanitize"].roots
    before = {roots: fingerprint.code_inputs(roots, root=root) for roots in (study, sanitize)}
    harness = root / "elu_study/core/harness.py"
    harness.write_text(harness.read_text().replace("import REP_MS, WARMUP_MS,", "import REP_MS as WARMUP_MS, "
                                                                               "WARMUP_MS as REP_MS,", 1))
    assert fingerprint.code_inputs(study, root=root) != before[study]
    child = root / "elu_study/jobs/sanitize/child.py"
    assert "elu_study.jobs.sanitize.child" in sanitize
    child.write_text(child.read_text().replace("SMALL_LENGTHS = (", "SMALL_LENGTHS = (7, ", 1))
    assert fingerprint.code_inputs(sanitize, root=root) != before[sanitize]


def test_a_lazy_import_inside_a_function_is_an_input(tmp_path):
    root = package(tmp_path)
    measure = root / "elu_study/jobs/launch/measure.py"
    measure.write_text(measure.read_text() + "\n\ndef later():\n    from elu_study.jobs.sizes import plan\n")
    assert "elu_study.jobs.sizes.plan" in fingerprint.measuring_modules(("elu_study.jobs.launch",), root)


def test_the_catalogue_counts_as_data_without_descriptions(tmp_path):
    root = package(tmp_path)
    catalogue = root / fingerprint.CATALOGUE
    before = fingerprint.catalogue_digest(root)
    text = catalogue.read_text()
    catalogue.write_text("# a new comment\n" + text.replace('what = "PyTorch\'s ELU', 'what = "Reworded: ELU', 1))
    assert fingerprint.catalogue_digest(root) == before
    catalogue.write_text(text.replace('flags = ["-DELU_FLOAT4_OP=Copy"]', 'flags = ["-DELU_FLOAT4_OP=Expf"]', 1))
    assert fingerprint.catalogue_digest(root) != before


def test_a_build_digest_follows_its_source_headers_and_flags_not_its_comments(tmp_path):
    kernel = tmp_path / "mine.cu"
    text = (build.KERNELS_DIR / "2_float4.cu").read_text()
    kernel.write_text(text)
    before = fingerprint.build_digest(str(kernel))
    kernel.write_text("// a new comment\n" + text.replace("\n", "  \n") + "\n/* and another */\n")
    assert fingerprint.build_digest(str(kernel)) == before
    assert fingerprint.build_digest(str(kernel), ["-DMY_KNOB=2"]) != before
    kernel.write_text(text + "\nstatic int extra;\n")
    assert fingerprint.build_digest(str(kernel)) != before
    assert fingerprint.build_digest("no/such/kernel") == "missing"


def test_headers_are_followed_through_includes(tmp_path):
    (tmp_path / "a.cuh").write_text('#include "b.cuh"\nint a;\n')
    (tmp_path / "b.cuh").write_text("int b;\n")
    first = fingerprint.included(['#include "a.cuh"\n#include <vector>\n'], [tmp_path])
    assert set(first) == {"a.cuh", "b.cuh"}
    (tmp_path / "b.cuh").write_text("int b2;\n")
    assert fingerprint.included(['#include "a.cuh"\n'], [tmp_path])["b.cuh"] != first["b.cuh"]


def test_builds_are_logged_once_each_and_only_under_kernels(tmp_path, monkeypatch):
    log = tmp_path / "builds.jsonl"
    monkeypatch.setenv(build.BUILD_LOG_ENV, str(log))
    build.note_build(build.build_spec("3_grid_stride", ["-DELU_GRID_WAVES=2"]))
    build.note_build(build.build_spec("3_grid_stride", ["-DELU_GRID_WAVES=2"]))
    build.note_build(build.build_spec("peers/cub_transform"))
    mine = tmp_path / "mine.cu"
    mine.write_text("// mine\n")
    build.note_build(build.build_spec(str(mine)))
    assert len(log.read_text().splitlines()) == 3
    assert fingerprint.logged_builds(log) == ["3_grid_stride -DELU_GRID_WAVES=2", "peers/cub_transform"]
    key = fingerprint.build_key("6_beyond_copy", ["-DX=1"], ["-DELU_OP_NAMESPACE=elu_study"])
    assert fingerprint.parse_build_key(key) == ("6_beyond_copy", ["-DX=1"], ["-DELU_OP_NAMESPACE=elu_study"])
    builds = fingerprint.fingerprint((), (), fingerprint.logged_builds(log), {})["builds"]  # digests without a compiler
    assert set(builds) == {"3_grid_stride -DELU_GRID_WAVES=2", "peers/cub_transform"}
    assert "missing" not in builds.values() and len(set(builds.values())) == 2


def test_a_module_held_as_an_input_but_now_presentation_or_bookkeeping_voids_nothing(tmp_path, monkeypatch):
    """A fingerprint taken when a module counted (here the study's table code) is not due once that module is
    declared presentation (here, as if core/tables.py were); a module that was deleted is gone, and due. The plan's
    line names a few per kind."""
    root = package(tmp_path)
    roots = ("elu_study.jobs.study",)
    held = {"code": fingerprint.code_inputs(roots, root=root), "catalogue": fingerprint.catalogue_digest(root),
            "builds": {}, "toolchain": {}}
    assert "elu_study.core.tables" in held["code"]
    monkeypatch.setattr(fingerprint, "PRESENTATION", (*fingerprint.PRESENTATION, "elu_study/core/tables.py"))
    assert fingerprint.changes(held, roots, root=root) == []
    assert "elu_study.core.timing" in held["code"]
    (root / "elu_study/core/timing.py").unlink()
    assert fingerprint.changes(held, roots, root=root) == ["code elu_study.core.timing (gone)"]
    reasons = [f"code m{i} (changed)" for i in range(5)] + ["catalogue c.toml", "build 1_naive"]
    assert fingerprint.summary(reasons) == ("code m0 (changed), m1 (changed), m2 (changed) and 2 more; "
                                            "catalogue c.toml; build 1_naive")


def test_a_new_step_voids_the_records_that_would_measure_it_and_no_other(tmp_path):
    """Each record digests the part of the catalogue its job reads (entries.READS): a new step and its kernel file
    are new rows of the main study, its profile and its sweep over sizes, and a new formula for the accuracy job; the
    records of step 6's and step 7's attempts, the model and the launch sweep stay current. A flag on one attempt
    voids that attempt's record alone (and the jobs that read the whole catalogue)."""
    root = package(tmp_path)
    catalogue = root / fingerprint.CATALOGUE
    jobs = ("study", "ncu", "sizes", "accuracy", "beyond", "sixteen", "model", "launch", "sanitize")
    before = {job: fingerprint.catalogue_digest(root, job) for job in jobs}
    text = catalogue.read_text()
    step = ('\n[kernels.8_new]\nformula = "1_naive"\nlaunch = { threads = "threads" }\nsass = { bits = [128] }\n'
            '\n[[entry]]\nname = "8_new"\nkind = "step"\nwhat = "a new step"\nvariant = "8_new"\n')
    catalogue.write_text(text.replace("\n[[entry]]", step + "\n[[entry]]", 1))
    voided = {job for job in jobs if fingerprint.catalogue_digest(root, job) != before[job]}
    assert voided == {"study", "ncu", "sizes", "accuracy", "beyond", "sanitize"}  # beyond: every step is compared
    marked = text.replace('name = "7_lean float16"\n', 'name = "7_lean float16"\nsustained = true\n', 1)
    assert marked != text
    catalogue.write_text(marked)
    voided = {job for job in jobs if fingerprint.catalogue_digest(root, job) != before[job]}
    assert voided == {"sixteen", "sanitize"}


def test_the_main_studys_rows_are_the_entries_its_record_reads():
    assert {e.name for e in entries.study_entries()} == {e.name for e in entries.ENTRIES.values() if entries.in_study(e)}
    assert {e.name for e in entries.profiled_entries()} == {
        e.name for e in entries.ENTRIES.values() if entries.READS["ncu"](e)}


def test_a_build_digest_is_the_same_in_every_checkout(monkeypatch, tmp_path):
    """#line names the kernel files by their full path (core.build); a checkout elsewhere gives the same digest."""
    here = fingerprint.build_digest("2_float4")
    kernels = tmp_path / "kernels"
    shutil.copytree(build.KERNELS_DIR, kernels)
    for name, value in {"KERNELS_DIR": kernels, "COMMON_DIR": kernels / "common",
                        "BINDING_SOURCE": kernels / "common" / "binding.cpp"}.items():
        monkeypatch.setattr(build, name, value)
    monkeypatch.setattr(fingerprint, "REPO_ROOT", tmp_path)
    assert str(tmp_path) in build.load_arguments(build.build_spec("2_float4"))["cuda_sources"][1]
    assert fingerprint.build_digest("2_float4") == here
