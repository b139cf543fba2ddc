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


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", readme, re.DOTALL).group(1).strip().splitlines()
    assert readme.index("```bash") < readme.index("\n## ")  # before any section
    assert len(block) == 2 and block[0].endswith("python -m elu_study") and block[1].endswith("python -m pytest")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "grep -m1 -- '-m pytest' README.md" in ci and 'eval "$test_command"' in ci


def test_notebooks_show_kernels_from_their_files_not_pasted():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            assert "__global__" not in source, f"{path.name} pastes kernel code; use study.show_kernel"


def test_every_step_has_a_notebook_that_shows_it():
    from elu_study import known_variants

    sources = {p.stem: p.read_text() for p in (ROOT / "notebooks").glob("*.ipynb")}
    for name in known_variants():
        shown = [stem for stem, text in sources.items() if f'study.show_kernel(\\"{name}\\")' in text]
        assert shown, f"no notebook shows kernels/{name}.cu"
