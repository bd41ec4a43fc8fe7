"""The type check, as CI runs it: mypy with the repository's configuration
(setup.cfg's [mypy] sections: the core strictly, the tools with the default
checks and check_untyped_defs) over spacy_sla gives no error, and the same
configuration reports a type error where there is one. It is part of the
test suite so that the command CI runs (the README's pytest command) fails
on a type error. mypy's cache lives in the ignored .mypy_cache folder: the
first run reads the libraries' types (about a minute), later ones only what
changed."""
import configparser
import subprocess
import sys
from pathlib import Path

from test_layout import CORE_LEVEL, PACKAGE, TOOLS

ROOT = Path(__file__).parent.parent
CONFIG = ROOT / "setup.cfg"
CACHE = ROOT / ".mypy_cache"
STRICT_FLAGS = ("disallow_untyped_defs", "disallow_incomplete_defs", "disallow_untyped_calls", "disallow_any_generics",
                "warn_return_any")


def run_mypy(*targets: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(CACHE), *targets],
        capture_output=True, text=True, cwd=cwd, timeout=900,
    )


def test_the_package_type_checks_with_the_repositorys_configuration():
    result = run_mypy()  # the files setup.cfg names: spacy_sla
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout


def test_the_same_check_reports_a_type_error(tmp_path):
    module = tmp_path / "typing_probe.py"
    module.write_text('def count_words(text: str) -> int:\n    return text.split()\n', encoding="utf8")
    result = run_mypy(str(module), cwd=tmp_path)
    assert result.returncode == 1
    assert 'typing_probe.py:2: error: Incompatible return value type (got "list[str]", expected "int")' in result.stdout


def test_the_core_is_checked_strictly_and_each_tool_by_the_default_checks():
    """setup.cfg names the packages: the strict flags for all of spacy_sla,
    relaxed for exactly the tool packages of tests/test_layout.py."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf8")
    assert parser["mypy"]["files"] == PACKAGE.name and parser.getboolean("mypy", "check_untyped_defs")
    strict = parser[f"mypy-{PACKAGE.name}.*"]
    assert all(strict.getboolean(flag) for flag in STRICT_FLAGS)
    relaxed = [section for section in parser.sections()
               if section.startswith(f"mypy-{PACKAGE.name}.") and section != f"mypy-{PACKAGE.name}.*"]
    assert len(relaxed) == 1
    assert sorted(relaxed[0][len("mypy-"):].split(",")) == sorted(f"{PACKAGE.name}.tools.{tool}.*" for tool in TOOLS)
    assert not any(parser.getboolean(relaxed[0], flag) for flag in STRICT_FLAGS)
    assert not set(CORE_LEVEL) & set(TOOLS)
