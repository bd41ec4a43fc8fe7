"""The plugin as a release: `python -m build` makes an sdist and a wheel of
the version in spacy_sla/about.py; the sdist holds every tracked file of the
package and the top-level files; the wheel, installed on its own, loads every
entry point setup.cfg declares from its own copy, answers every `spacy sla`
command's --help, and carries every file the package tracks (its data files
and py.typed too)."""
import configparser
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List

import pytest
from typer.main import get_command

from spacy_sla.about import __version__
from spacy_sla.tools.cli import sla_cli

ROOT = Path(__file__).parent.parent
TOP_LEVEL = ["README.md", "setup.cfg", "pyproject.toml", "CHANGELOG.md"]
DIST_INFO = f"spacy_sla-{__version__}.dist-info"

# Loads every entry point of the installed wheel's dist-info, in a Python
# started with -I (no PYTHONPATH, no current directory on sys.path) and the
# install directory first on sys.path, so that spacy_sla is the wheel's copy
# and not this checkout's editable install.
LOAD_ENTRY_POINTS = f"""
import importlib.metadata, json, pathlib, sys
site = pathlib.Path(sys.argv[1])
sys.path.insert(0, str(site))
dist = importlib.metadata.PathDistribution(site / {DIST_INFO!r})
loaded = {{}}
for entry_point in dist.entry_points:
    target = entry_point.load()
    loaded.setdefault(entry_point.group, {{}})[entry_point.name] = {{
        "callable": callable(target), "file": sys.modules[entry_point.module].__file__,
    }}
import spacy_sla
print(json.dumps({{"version": dist.version, "spacy_sla": spacy_sla.__file__, "entry_points": loaded}}))
"""

# Every `spacy sla` command's --help from the installed wheel, through spaCy's
# own CLI (which finds the command group by its entry point), as above.
HELP_OF_EVERY_COMMAND = """
import json, pathlib, sys
sys.path.insert(0, str(pathlib.Path(sys.argv[1])))
from click.testing import CliRunner
from spacy.cli._util import app
from spacy.util import registry
from typer.main import get_command
registry.cli.get_all()
spacy_cli = get_command(app)
names = sorted(spacy_cli.commands["sla"].commands)
results = {name: CliRunner().invoke(spacy_cli, ["sla", name, "--help"]) for name in names}
print(json.dumps({"file": sys.modules["spacy_sla.tools.cli"].__file__,
                  "help": {name: [result.exit_code, result.output] for name, result in results.items()}}))
"""


def declared_entry_points() -> Dict[str, List[str]]:
    """The names of setup.cfg's [options.entry_points], per group."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    return {
        group: sorted(line.split("=")[0].strip() for line in value.splitlines() if line.strip() and "=" in line)
        for group, value in parser["options.entry_points"].items()
    }


def python_requires() -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    return parser["options"]["python_requires"]


def classified_pythons() -> List[str]:
    """The Python versions setup.cfg's classifiers name, in order."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    return re.findall(r"Programming Language :: Python :: (3\.\d+)$", parser["metadata"]["classifiers"], flags=re.M)


def readme_pythons() -> re.Match:
    """README.md's one line on Python: the versions that install, and the one CI tests."""
    found = re.search(r"^Python: (3\.\d+) to (3\.\d+) installs \(.*\); CI tests (3\.\d+)\.$",
                      (ROOT / "README.md").read_text(encoding="utf8"), flags=re.M)
    assert found, "README.md has no line 'Python: 3.X to 3.Y installs (...); CI tests 3.Z.'"
    return found


def minor(version: str) -> int:
    return int(version.split(".")[1])


def test_the_metadata_says_which_pythons_install_and_the_readme_which_are_tested():
    first, last, tested = readme_pythons().groups()
    assert python_requires() == f">={first}"
    assert classified_pythons() == [f"3.{n}" for n in range(minor(first), minor(last) + 1)]
    assert minor(first) <= minor(tested) <= minor(last)
    # CI runs the README's commands with the interpreter this suite runs on
    assert f"3.{sys.version_info.minor}" == tested


def test_the_python_floor_is_the_one_the_torch_floor_needs():
    """torch's floor (setup.cfg) publishes wheels for Python 3.10 and newer
    only: a lower python_requires would promise an install that fails."""
    torch = importlib.metadata.metadata("torch")
    installed, floor = torch["Version"].split("+")[0], _declared_floor("torch")
    if installed != floor:
        pytest.skip(f"the environment has torch {installed}, not the floor {floor}")
    assert torch["Requires-Python"] == python_requires()


def _declared_floor(package: str) -> str:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg", encoding="utf8")
    requirement = next(line.strip() for line in parser["options"]["install_requires"].splitlines()
                       if re.match(rf"{package}\b", line.strip()))
    return re.search(r">=([\d.]+)", requirement).group(1)


def run(command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def tracked_files() -> List[str]:
    """What a release is built from: the files git tracks (that exist)."""
    try:
        result = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, timeout=60)
    except OSError:
        result = None
    if result is None or result.returncode != 0:
        pytest.skip("needs a git checkout: a release is built from one")
    return sorted(name for name in result.stdout.decode("utf8").split("\0") if name and (ROOT / name).is_file())


def test_the_changelog_describes_the_version_in_about():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf8")
    versions = [version for version in re.findall(r"^## \[([^\]]+)\]", text, flags=re.M) if version != "Unreleased"]
    assert versions and versions[0] == __version__


@pytest.mark.slow
def test_the_release_builds_installs_and_loads_every_entry_point(tmp_path: Path) -> None:
    files = tracked_files()
    package_files = [name for name in files if name.startswith("spacy_sla/")]
    # The build writes build/ and *.egg-info into its source tree: a copy of
    # the tracked files, not this checkout, which others use at the same time.
    source = tmp_path / "source"
    for name in files:
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    dist = tmp_path / "dist"
    # Without --sdist/--wheel, build makes the sdist and then the wheel from
    # the unpacked sdist: what the sdist lacks, the wheel lacks too.
    # --no-isolation: an isolated build installs setuptools and wheel from the
    # package index into a fresh environment, which the tests must not need
    # (they run offline); this environment has them (the `test` extra).
    run([sys.executable, "-m", "build", "--no-isolation", "--outdir", dist, source])
    wheel, sdist = dist / f"spacy_sla-{__version__}-py3-none-any.whl", dist / f"spacy_sla-{__version__}.tar.gz"
    assert sorted(dist.iterdir()) == sorted([wheel, sdist])

    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert sorted(set(package_files + TOP_LEVEL) - in_sdist) == []

    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
        metadata = archive.read(f"{DIST_INFO}/METADATA").decode("utf8")
    assert sorted(set(package_files) - in_wheel) == []
    # the package's type hints reach users' type checkers (PEP 561)
    assert "spacy_sla/py.typed" in package_files and "spacy_sla/py.typed" in in_wheel
    # the plugin only: the paper's replication, the performance measurements and the tests stay in the repository
    assert sorted(name for name in in_wheel if name.split("/")[0] not in {"spacy_sla", DIST_INFO}) == []
    assert f"\nVersion: {__version__}\n" in metadata
    assert f"\nRequires-Python: {python_requires()}\n" in metadata
    assert re.findall(r"^Classifier: Programming Language :: Python :: (3\.\d+)$", metadata, flags=re.M) == \
        classified_pythons()
    # no upper bound: pip must not downgrade a user's newer torch
    assert re.findall(r"^Requires-Dist: torch\b.*$", metadata, flags=re.M) == ["Requires-Dist: torch>=2.13.0"]

    site = tmp_path / "site"
    run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", site, wheel])
    assert [name for name in package_files if not (site / name).is_file()] == []
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    result = run([sys.executable, "-I", "-c", LOAD_ENTRY_POINTS, site], cwd=tmp_path, env=environment)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["version"] == __version__
    assert Path(report["spacy_sla"]).is_relative_to(site)
    loaded = report["entry_points"]
    assert {group: sorted(names) for group, names in loaded.items()} == declared_entry_points()
    assert len(declared_entry_points()) == 6  # factories, architectures, misc, cli, loggers, readers
    for group, names in loaded.items():
        for name, target in names.items():
            assert target["callable"], f"{group}: {name}"
            assert Path(target["file"]).is_relative_to(site), f"{group}: {name} came from {target['file']}"

    # every command the documentation lists answers --help from the wheel alone
    result = run([sys.executable, "-I", "-c", HELP_OF_EVERY_COMMAND, site], cwd=tmp_path, env=environment)
    answered = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(answered["file"]).is_relative_to(site)
    assert sorted(answered["help"]) == sorted(get_command(sla_cli).commands)
    for name, (exit_code, output) in answered["help"].items():
        assert exit_code == 0 and f"Usage: spacy sla {name} " in output, (name, output)
