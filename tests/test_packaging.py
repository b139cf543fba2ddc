"""The project's set-up agrees with itself: dependencies, README commands, CI, notebooks."""

import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONDA_NAMES = {"pytorch": "torch"}


def _name_and_spec(requirement: str) -> tuple[str, str]:
    requirement = requirement.split("#")[0].strip()
    match = re.match(r"([A-Za-z0-9_.-]+)\s*(.*)", requirement)
    return CONDA_NAMES.get(match.group(1), match.group(1)).lower(), match.group(2).replace(" ", "")


def test_environment_yml_lists_what_pyproject_lists():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip_deps = dict(_name_and_spec(r) for r in project["dependencies"])
    for extra in project["optional-dependencies"].values():
        pip_deps.update(_name_and_spec(r) for r in extra)
    lines = (ROOT / "environment.yml").read_text().split("dependencies:")[1].splitlines()
    conda_deps = dict(_name_and_spec(line.strip()[2:]) for line in lines if line.strip().startswith("- "))
    conda_deps.pop("python")
    assert conda_deps == pip_deps


def test_readme_gives_the_two_commands_after_its_first_screen_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.DOTALL).group(1).strip().splitlines()
    # The first screen is the study's verdict, its steps and notebooks; the install section comes right after it.
    assert readme.index("<!-- front:end -->") < readme.index("## Install and test") < readme.index("```bash")
    assert readme.index("```bash") < readme.index("\n## ", readme.index("## Install and test") + 1)
    assert len(block) == 2 and block[0].endswith("python -m elu_study") and block[1].endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 -- '-m pytest' README.md" in ci and 'eval "$test_command"' in ci
    # what CI's grep finds is the test command, not a line of prose that mentions pytest
    first = next(line for line in readme.splitlines() if "-m pytest" in line)
    assert first == block[1] == "python -m pip install -e '.[test]' && python -m pytest"


def test_notebooks_show_kernels_from_their_files_not_pasted():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            assert "__global__" not in source, f"{path.name} pastes kernel code; use study.show_kernel"


def test_every_step_has_a_notebook_that_shows_it():
    """Each kernel file is shown by some notebook: whole or in part (``study.show_kernel("name", ...)``), or as
    the lines that changed from the previous step (``study.show_diff("previous", "name")``)."""
    from elu_study import known_variants

    sources = {p.stem: "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"])
               for p in (ROOT / "notebooks").glob("*.ipynb")}
    for name in known_variants():
        shown = [stem for stem, text in sources.items()
                 if re.search(rf'study\.show_kernel\("{name}"[,)]|study\.show_diff\("[^"]+", "{name}"', text)]
        assert shown, f"no notebook shows kernels/{name}.cu"
