"""The logger `spacy sla ab` adds to each run: training's progress as JSON
lines, a line per evaluation and at most one per interval between them."""
import io
import json

import spacy

from spacy_sla.training.progress_logger import PROGRESS_FILE, progress_logger


def test_the_logger_writes_steps_evaluations_and_the_end(tmp_path):
    nlp = spacy.blank("en")
    nlp.config["training"]["max_steps"] = 40
    path = tmp_path / PROGRESS_FILE
    log_step, finalize = progress_logger(str(path), every_seconds=0.0)(nlp, io.StringIO(), io.StringIO())
    log_step({"step": 0, "score": 0.25, "losses": {"textcat": 2.0}})
    log_step(None)
    log_step(None)
    log_step({"step": 3, "score": 0.5, "losses": {"textcat": 1.0}})
    finalize()
    lines = [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]
    assert [(line["step"], line.get("score"), line.get("done")) for line in lines] == [
        (0, 0.25, None), (1, None, None), (2, None, None), (3, 0.5, None), (3, None, True)]
    assert all(line["max_steps"] == 40 for line in lines) and lines[3]["losses"] == {"textcat": 1.0}
    # between evaluations, at most one line per every_seconds
    log_step, finalize = progress_logger(str(path), every_seconds=3600.0)(nlp, io.StringIO(), io.StringIO())
    log_step({"step": 0, "score": 0.25, "losses": {}})
    for _ in range(5):
        log_step(None)
    finalize()
    assert [json.loads(line)["step"] for line in path.read_text(encoding="utf8").splitlines()] == [0, 5]
