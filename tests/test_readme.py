"""The README's first three commands are the set-up, the main job and the
tests, and CI runs exactly the set-up and test commands."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def readme_python_blocks():
    return re.findall(r"```python\n(.+?)\n```", (ROOT / "README.md").read_text(encoding="utf8"), flags=re.S)


@pytest.mark.slow
def test_the_quick_start_runs_offline_as_written(tmp_path):
    quick_start = readme_python_blocks()[0]
    result = subprocess.run(
        [sys.executable, "-c", quick_start],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # the hidden states of 9 wordpieces ([CLS] the cat sat on the mat . [SEP]) and a 9 x 9 mask
    assert "torch.Size([1, 9, 384])" in result.stdout or "(1, 9, 384)" in result.stdout
    assert result.stdout.count("[") >= 9


def relative_links(markdown_file: Path):
    text = markdown_file.read_text(encoding="utf8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+://", target) and not target.startswith("#"):
            yield target.split("#")[0]


@pytest.mark.parametrize(
    "markdown_file", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))], ids=lambda path: path.name
)
def test_every_relative_link_of_the_docs_names_a_file_that_exists(markdown_file):
    missing = [link for link in relative_links(markdown_file) if not (markdown_file.parent / link).exists()]
    assert missing == []
