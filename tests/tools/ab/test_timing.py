"""`--dry-run` estimates the time of the runs to train from a few timed
steps, or says why it cannot (the timed estimate itself: test_runs.py,
with a real training run)."""
from pathlib import Path

from spacy_sla.tools.ab.runs import AbRun
from spacy_sla.tools.ab.timing import budget_of, estimate_lines


def run_of(tmp_path: Path, training: str) -> AbRun:
    config = tmp_path / "vanilla.cfg"
    config.write_text(f"[paths]\ntrain = null\n\n[system]\nseed = 0\n\n[training]\n{training}\n", encoding="utf8")
    return AbRun("vanilla", 0, None, config, tmp_path / "out", tmp_path / "train.spacy", tmp_path / "dev.spacy",
                 overrides={"training.eval_frequency": 50, "nlp.lang": "en"})


def test_the_budget_is_read_with_the_overrides(tmp_path):
    run = run_of(tmp_path, "max_steps = 400\nmax_epochs = 0\neval_frequency = 200")
    assert budget_of(run) == {"max_steps": 400, "max_epochs": 0, "eval_frequency": 50}


def test_why_no_estimate_is_made(tmp_path):
    run = run_of(tmp_path, "max_steps = 0\nmax_epochs = 3\neval_frequency = 200")
    assert estimate_lines([run], []) == ["Time: nothing to train."]
    assert estimate_lines([run], [run], steps=0) == ["Time: not estimated (--time-steps 0)."]
    assert "give 3 or more" in estimate_lines([run], [run], steps=2)[0]
    assert estimate_lines([run], [run], busy="pid 7 on h is training into out") == [
        "Time: not estimated: pid 7 on h is training into out"]
    (epochs,) = estimate_lines([run], [run])
    assert epochs.startswith("Time: not estimated: training.max_steps = 0 trains by epochs (training.max_epochs = 3)")
    assert "--training.max_steps N" in epochs


def test_a_timing_run_that_fails_says_so(tmp_path):
    run = run_of(tmp_path, "max_steps = 40\neval_frequency = 200")
    lines = estimate_lines([run], [run], steps=3)
    assert lines[0] == "Time: not estimated: the timing run of vanilla/seed0 (3 steps) failed:"
    assert len(lines) > 1  # the end of spaCy's output, which says why
