"""The README's first three commands are the set-up, the main job and the
tests, and CI runs exactly the set-up and test commands; the quick start
runs as written and prints the mask that the README's figure draws."""
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from spacy_sla import SyntaxMask

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


def test_the_main_jobs_time_is_stated_with_the_load_it_depends_on():
    """Measured times only, idle and busy: the demo's minutes depend on what else the cores run."""
    text = (ROOT / "README.md").read_text(encoding="utf8")
    before = " ".join(text[: text.index("```bash\n.venv/bin/python -m spacy project run demo")].split()[-40:])
    statement = before[before.index("Main job"):]
    assert "depends on their load" in statement and "2 min 27 s" in statement and "7 min 24 s" in statement
    assert "about" not in statement.lower()


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
    printed = numpy.array([[int(cell) for cell in row.split()] for row in re.findall(r"\[\[?([01 ]+)\]", result.stdout)])
    assert printed.shape == (9, 9)
    # [CLS] and [SEP] see and are seen by everything; between them, one piece a word: the README's figure
    assert printed[[0, -1], :].all() and printed[:, [0, -1]].all()
    words, drawn = readme_figure()
    assert (printed[1:-1, 1:-1] == drawn).all()
    assert not drawn.all()  # the mask hides something


FIGURE = re.compile(r"```\n( +The +cat +sat +on +the +mat +\.\n.*?)```", flags=re.S)


def readme_figure(markdown_file: Path = ROOT / "README.md") -> Tuple[List[str], numpy.ndarray]:
    """The words and the mask of the README's figure ("x": visible)."""
    header, *rows = FIGURE.search(markdown_file.read_text(encoding="utf8")).group(1).splitlines()
    words = header.split()
    cells = [row.split() for row in rows]
    assert [row[0] for row in cells] == words
    return words, numpy.array([[cell == "x" for cell in row[1:]] for row in cells])


def test_the_readme_figure_is_the_mask_of_its_sentence_at_one_hop():
    """The parse the figure states (The→cat→sat, on→sat, the→mat→on,
    .→sat), the builder and settings it names."""
    words, drawn = readme_figure()
    assert words == ["The", "cat", "sat", "on", "the", "mat", "."]
    doc = Doc(spacy.blank("en").vocab, words=words, heads=[1, 2, 2, 2, 5, 3, 2],
              deps=["det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"])
    assert (SyntaxMask(threshold=1, punct_rule="spacy")(doc) == drawn).all()
    assert not (SyntaxMask(threshold=3, punct_rule="spacy")(doc) == drawn).all()  # m matters on this sentence


def test_how_it_works_draws_the_same_figure():
    readme_words, readme_mask = readme_figure()
    words, mask = readme_figure(ROOT / "docs" / "how-it-works.md")
    assert words == readme_words and (mask == readme_mask).all()


def relative_links(markdown_file: Path):
    text = markdown_file.read_text(encoding="utf8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"[a-z]+://", target) and not target.startswith("#"):
            yield target.split("#")[0]


@pytest.mark.parametrize(
    "markdown_file", [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "replication" / "README.md"],
    ids=lambda path: str(path.relative_to(ROOT)),
)
def test_every_relative_link_of_the_docs_names_a_file_that_exists(markdown_file):
    missing = [link for link in relative_links(markdown_file) if not (markdown_file.parent / link).exists()]
    assert missing == []
