"""What a failed run's log says (the error, the user's frames, a config that
spaCy's validation refuses), the message that names the run, and which
failures stop the runs not yet started."""
import json
from pathlib import Path
from types import SimpleNamespace

import spacy

from spacy_sla.tools.ab.evaluation import READ, SCORE, STATISTICS, failure_path
from spacy_sla.tools.ab.failures import (
    EVALUATE,
    TRAIN,
    RunFailure,
    failure_message,
    logged_failure,
    read_failure,
    repeating_failure,
    user_frames,
)

LIBRARY = str(Path(spacy.__file__).parent / "language.py")
TRACEBACK_LOG = f"""Saving to output directory
Traceback (most recent call last):
  File "{LIBRARY}", line 1197, in update
    proc.update(examples)
  File "/home/user/project/scripts/rel_pipe.py", line 88, in update
    self.model.set_dropout(drop)
AttributeError: 'Model' object has no attribute 'set_dropout'
"""
# what `spacy train` prints for a component's block that its factory refuses (no traceback)
VALIDATION_LOG = """\x1b[38;5;4mℹ Using CPU\x1b[0m
=========================== Initializing pipeline ===========================
\x1b[38;5;1m✘ Config error for 'relation_extractor'\x1b[0m
relation_extractor -> threshold\tat root: 'high' is not <class 'float'>
{'nlp': <spacy.lang.en.English object at 0x7f>, 'threshold': 'high'}
"""


def run(variant: str, seed: int, tmp_path: Path = Path("out")):
    run_dir = tmp_path / variant / f"seed{seed}"
    return SimpleNamespace(variant=variant, seed=seed, size=None, sizes_compared=False, code_path=Path("functions.py"),
                           run_dir=run_dir, model_dir=run_dir / "model-last", dev_path=Path("dev.spacy"),
                           name=f"{variant}/seed{seed}")


def result(variant: str, seed: int, failure=None):
    return SimpleNamespace(run=run(variant, seed), failure=failure, failed=failure is not None)


def test_a_traceback_gives_its_error_and_the_users_frames_only():
    logged = logged_failure(TRACEBACK_LOG)
    assert logged["error"] == "AttributeError: 'Model' object has no attribute 'set_dropout'"
    assert not logged["config_validation"]
    assert user_frames(logged["frames"]) == ["/home/user/project/scripts/rel_pipe.py:88 (update)"]
    assert user_frames([{"file": json.__file__, "line": 1, "function": "f"},
                        {"file": "<frozen runpy>", "line": 2, "function": "g"}]) == []


def test_a_config_refused_by_spacys_validation_is_recognised_without_a_traceback():
    logged = logged_failure(VALIDATION_LOG)
    assert logged["config_validation"] and logged["frames"] == []
    assert logged["error"] == ("Config error for 'relation_extractor': relation_extractor -> threshold at root: "
                               "'high' is not <class 'float'>")


def test_a_failed_evaluation_is_read_from_its_record(tmp_path):
    output = tmp_path / "dev-evaluation.json"
    failure_path(output).write_text(json.dumps({
        "step": SCORE, "corpus": {"mode": "plain", "dev_corpus": "corpora.dev", "reader": "Gold_ents_Corpus.v1"},
        "error": "ValueError: cannot reshape array of size 0 into shape (0)",
        "frames": [{"file": LIBRARY, "line": 1, "function": "evaluate"},
                   {"file": "/home/user/functions.py", "line": 101, "function": "instance_forward"}]}))
    (tmp_path / "evaluate.log").write_text(TRACEBACK_LOG)
    failure = read_failure(EVALUATE, tmp_path / "evaluate.log", output)
    assert failure.error.startswith("ValueError: cannot reshape") and failure.evaluation_step == SCORE
    assert failure.user_frames == ["/home/user/functions.py:101 (instance_forward)"]
    message = failure_message(run("sla", 1), failure, Path("out/sla/seed1/train-config.cfg"), logged_evaluations=3)
    assert message.startswith("[SLA-E100] the sla arm, seed 1 failed at the evaluate step: ValueError: cannot reshape")
    assert "raised in your code at /home/user/functions.py:101 (instance_forward)" in message
    assert "`python -m spacy evaluate out/sla/seed1/model-last dev.spacy --code functions.py` does the same and " \
           "fails the same way" in message
    assert "(corpora.dev: Gold_ents_Corpus.v1); it logged 3 evaluation(s)" in message
    assert f"Log: {tmp_path / 'evaluate.log'}" in message


def test_each_failed_step_says_whether_plain_spacy_fails_the_same_way():
    def said(stage: str, step: str = "", mode: str = "config") -> str:
        failure = RunFailure(stage, "ValueError: x", evaluation_step=step, corpus={"mode": mode, "reader": "r.v1"})
        return failure_message(run("vanilla", 0), failure, Path("cfg"), logged_evaluations=0)

    assert "plain `spacy train` of the arm's config" in said(TRAIN) and "fails the same way" in said(TRAIN)
    assert "the evaluation inside `spacy train` of this model fails the same way" in said(EVALUATE, SCORE)
    assert "reading the dev examples as `spacy train` reads" in said(EVALUATE, READ)
    assert "neither `spacy train` nor `spacy evaluate` runs" in said(EVALUATE, STATISTICS)
    assert "Log: none" in said(TRAIN)


def test_only_failures_that_every_run_would_repeat_stop_the_others():
    arms = ["vanilla", "sla", "window"]
    same = RunFailure(EVALUATE, "ValueError: x", evaluation_step=SCORE)
    other = RunFailure(EVALUATE, "ValueError: y", evaluation_step=SCORE)
    assert repeating_failure([result("vanilla", 0, same)], arms) is None  # the other arms may not fail
    assert repeating_failure([result("vanilla", 0, same), result("sla", 0, same)], arms) is None
    assert repeating_failure([result("vanilla", 0, same), result("sla", 0, same), result("window", 0, other)],
                             arms) is None
    assert repeating_failure([result("vanilla", 0, same), result("sla", 0), result("window", 0, same)], arms) is None
    reason = repeating_failure([result("vanilla", 0, same), result("sla", 0, same), result("window", 0, same)], arms)
    assert "the first run of every arm" in reason and "evaluate step with the same error (ValueError: x)" in reason
    refused = RunFailure(TRAIN, "Config error for 'ner': ...", config_validation=True)
    assert "spaCy's config validation" in repeating_failure([result("vanilla", 0, refused)], arms)
