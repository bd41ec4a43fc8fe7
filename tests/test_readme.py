"""The README's first three commands are the set-up, the main job and the
tests, and CI runs exactly the set-up and test commands."""
import re
from pathlib import Path

ROOT = Path(__file__).parent.parent


def readme_commands():
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text(encoding="utf8"))[:3]


def test_ci_runs_the_readme_set_up_and_test_commands():
    set_up, main_job, tests = readme_commands()
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf8").splitlines()
    assert set_up in ci_lines
    assert tests in ci_lines
    assert ci_lines.index(set_up) < ci_lines.index(tests)
    assert main_job == ".venv/bin/python -m spacy project run demo"
