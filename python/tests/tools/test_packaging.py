"""The package as users get it: a wheel and an sdist that ``python -m build`` makes
and ``twine check`` passes, shipping the conformance suite with its harness, and a
wheel that installs into a new virtualenv (no editable install, no source tree on
the path) where the ``ocf`` command inspects, verifies and is CONFORMANT.
"""

from __future__ import annotations

import email
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from repo_paths import PYTHON_DIR

CASES = PYTHON_DIR.parent / "conformance" / "cases"
# What the source tree puts on the path of the tests: never on the installed wheel's.
TREE_ONLY_ENVIRONMENT = ("PYTHONPATH", "OCF_CONFORMANCE_CASES", "VIRTUAL_ENV")


def run(command: Sequence[str | Path], cwd: Path | None = None, expect: int = 0,
        source_tree: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``command``; ``source_tree=False`` hides the source tree's environment from it."""
    env = {k: v for k, v in os.environ.items()
           if source_tree or k not in TREE_ONLY_ENVIRONMENT}
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False, timeout=1200)
    assert done.returncode == expect, f"{command}: exit {done.returncode}\n" \
                                      f"{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel that ``python -m build`` makes of a copy of python/."""
    work = tmp_path_factory.mktemp("build")
    # A copy, so the build's own files (egg-info, build/) stay out of the source tree;
    # the copy follows the symlink to conformance/cases as the sdist does.
    source = work / "python"
    shutil.copytree(PYTHON_DIR, source, ignore=shutil.ignore_patterns(
        "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"))
    # --no-isolation: the build backend (setuptools) of the dev extra, not a download.
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", work / "dist", source])
    (sdist,) = (work / "dist").glob("ocf-*.tar.gz")
    (wheel,) = (work / "dist").glob("ocf-*-py3-none-any.whl")
    return {"sdist": sdist, "wheel": wheel}


@pytest.fixture(scope="module")
def installed(dist: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the wheel installed by pip, its dependencies resolved."""
    venv = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", venv], source_tree=False)
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet",
         "--disable-pip-version-check", dist["wheel"]], source_tree=False)
    return venv


def case_files() -> set[str]:
    return {str(p.relative_to(CASES)) for p in CASES.rglob("*") if p.is_file()}


def test_the_wheel_and_the_sdist_pass_twine_check(dist: dict[str, Path]) -> None:
    done = run([sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"]])
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_and_the_sdist_ship_every_conformance_case(dist: dict[str, Path]) -> None:
    in_wheel = "ocf/conformance/cases/"
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        shipped = {n[len(in_wheel):] for n in wheel.namelist() if n.startswith(in_wheel)}
    assert shipped == case_files()
    with tarfile.open(dist["sdist"]) as sdist:
        in_sdist = "/src/ocf/conformance/cases/"
        packed = {m.name.split(in_sdist, 1)[1] for m in sdist.getmembers()
                  if m.isfile() and in_sdist in m.name}
    assert packed == case_files()


def test_the_installed_wheel_inspects_verifies_and_runs_the_conformance_suite(
        dist: dict[str, Path], installed: Path, tmp_path: Path) -> None:
    python, ocf = installed / "bin" / "python", installed / "bin" / "ocf"

    def in_venv(*command: str | Path) -> str:
        return run(command, cwd=tmp_path, source_tree=False).stdout

    where = in_venv(python, "-c", "import ocf; print(ocf.__file__)")
    assert Path(where.strip()).is_relative_to(installed), where  # not the source tree
    version = wheel_metadata(dist["wheel"])["Version"]
    assert in_venv(ocf, "--version") == f"ocf {version}\n"
    in_venv(python, "-c", "import numpy as np, ocf\n"
                          "ocf.save_file({'w': np.arange(6.0).reshape(2, 3)}, 'w.ocf')")
    listing = in_venv(ocf, "inspect", "w.ocf")
    assert f"written by ocf-python {version}," in listing, listing
    assert re.search(r"^w\s+float64\s+\[2, 3\]", listing, re.M), listing
    assert in_venv(ocf, "verify", "w.ocf").startswith("OK: ")
    suite = in_venv(ocf, "conformance")
    assert "RESULT: CONFORMANT" in suite, suite
    assert re.search(rf"^total\s+{len(list(CASES.glob('*/*')))}\s", suite, re.M), suite


def test_conformance_without_its_cases_says_where_to_get_them(tmp_path: Path) -> None:
    done = run([sys.executable, "-m", "ocf", "conformance", "--cases", tmp_path / "nowhere"],
               expect=2)
    assert "no cases at" in done.stderr
    assert "conformance/cases of the OCF repository" in done.stderr


def wheel_metadata(wheel: Path) -> email.message.Message:
    """The wheel's METADATA (name, version, requirements)."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(archive.read(name))


def extra_requirements(wheel: Path, extra: str) -> list[Requirement]:
    """The requirements the wheel's metadata lists for ``extra``."""
    message = wheel_metadata(wheel)
    requirements = [Requirement(r) for r in message.get_all("Requires-Dist") or []]
    return [r for r in requirements if r.marker is not None
            and r.marker.evaluate({"extra": extra})]


@pytest.mark.parametrize("extra", ["torch", "jax"])
def test_a_framework_extra_is_satisfied_by_the_framework_already_installed(
        dist: dict[str, Path], extra: str) -> None:
    """pip upgrades a requirement only when it is not satisfied (its default strategy),
    so ``pip install 'ocf[torch]'`` keeps an installed torch, CPU build included."""
    requirements = extra_requirements(dist["wheel"], extra)
    assert extra in [r.name for r in requirements]
    for requirement in requirements:
        installed = metadata.version(requirement.name)  # "2.13.0+cpu" for this machine's torch
        assert requirement.specifier.contains(installed, prereleases=True), \
            f"ocf[{extra}] requires {requirement}; the installed {installed} would be replaced"


# -- one version everywhere, and the README's install lines ------------------------

def newest_release(changelog: str) -> str:
    """The version of the first release heading (``## 0.2.0 — date``) of CHANGELOG.md."""
    found = re.search(r"^## (\d+\.\d+\.\d+)\b", changelog, re.M)
    assert found is not None, "CHANGELOG.md names no release"
    return found.group(1)


def test_the_wheel_the_package_and_the_changelog_carry_one_version(
        dist: dict[str, Path], tmp_path: Path) -> None:
    """``ocf --version``, the writer stamp of files and the wheel's metadata read
    ocf/_version.py; CHANGELOG.md's newest release is that version. (The installed
    wheel's own ``--version`` and stamp are pinned in the test above.)"""
    version = wheel_metadata(dist["wheel"])["Version"]
    source = (PYTHON_DIR / "src" / "ocf" / "_version.py").read_text()
    assert f'__version__ = "{version}"' in source
    changelog = (PYTHON_DIR.parent / "CHANGELOG.md").read_text()
    assert newest_release(changelog) == version
    assert run([sys.executable, "-m", "ocf", "--version"]).stdout == f"ocf {version}\n"
    import numpy as np

    import ocf
    ocf.save_file({"w": np.zeros(2)}, tmp_path / "w.ocf")
    with ocf.open(tmp_path / "w.ocf") as reader:
        assert reader.index.writer == f"ocf-python {version}"


def readme_install_lines() -> list[list[str]]:
    """The commands of README.md's install block, comments dropped, split as a shell would."""
    readme = (PYTHON_DIR.parent / "README.md").read_text()
    block = re.search(r"<!-- install lines[^>]*-->\n```sh\n(.*?)```", readme, re.S)
    assert block is not None, "README.md has no install block"
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines()
            if line.strip()]


def test_the_readme_install_lines_resolve_in_a_new_virtualenv_without_cuda(
        dist: dict[str, Path], tmp_path: Path) -> None:
    """pip resolves every line of the README's install block together in a new virtualenv
    (``--dry-run``: nothing is installed) to the CPU build of torch and no CUDA package.

    PyTorch's CPU index is not reachable from the test; the torch line's stand-in is the
    file that index serves, the CPU wheel of the torch the test set-up installed."""
    lines = readme_install_lines()
    assert all(line[:2] == ["pip", "install"] for line in lines), lines
    (torch_line,) = [line for line in lines if "--index-url" in line]
    assert torch_line == ["pip", "install", "torch", "--index-url",
                          "https://download.pytorch.org/whl/cpu"]
    torch_version = metadata.version("torch")
    assert torch_version.endswith("+cpu"), torch_version
    run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", tmp_path,
         f"torch=={torch_version}"])
    (torch_wheel,) = tmp_path.glob("torch-*.whl")
    requirements: list[str] = [str(torch_wheel)]
    for line in lines:
        if line is torch_line:
            continue
        for argument in line[2:]:
            assert argument.startswith("./python"), line
            extra = argument.removeprefix("./python")
            if extra:
                assert extra_requirements(dist["wheel"], extra.strip("[]")), argument
            requirements.append(f"{dist['wheel']}{extra}")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], source_tree=False)
    report = tmp_path / "report.json"
    run([venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--dry-run",
         "--disable-pip-version-check", "--report", report, *requirements], source_tree=False)
    chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert chosen["torch"] == torch_version
    assert {"ocf", "lightning", "transformers", "accelerate", "jax", "keras"} <= set(chosen)
    cuda = sorted(name for name in chosen if name.startswith(("nvidia-", "cuda", "triton")))
    assert not cuda, f"the install lines pull CUDA packages: {cuda}"
