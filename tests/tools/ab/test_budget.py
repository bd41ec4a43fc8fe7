"""A budget that cannot train is named before any run trains ([SLA-W018],
with the two overrides that fit the schedule to it), and a dev curve still
rising at the last evaluation is named in the report ([SLA-W019])."""
from pathlib import Path

import pytest
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.budget import budget_problems, config_budget_warnings, rising_at_the_end, rising_curve_warnings
from spacy_sla.tools.init_config.manifest import write_manifest

from .test_plan import ab_args, write_data

FIT = "--training.optimizer.learn_rate.warmup_steps 4 --training.optimizer.learn_rate.total_steps 40"


@pytest.fixture(scope="module")
def textcat_config(tmp_path_factory) -> Path:
    """`spacy init config --pipeline textcat --gpu`: warmup_linear.v1 with 250 warm-up steps of 20000."""
    path = tmp_path_factory.mktemp("budget") / "textcat.cfg"
    config = init_config(lang="en", pipeline=["textcat"], optimize="accuracy", gpu=True, pretraining=False)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def test_a_budget_inside_the_warm_up_is_named_with_the_overrides_that_fit(textcat_config):
    (warning,) = config_budget_warnings(textcat_config, {"training.max_steps": 40}, "the runs")
    assert warning.startswith("[SLA-W018] The training budget of the runs does not fit its learning-rate schedule: "
                              "training.max_steps 40 ends before the learning-rate warm-up ends "
                              "(training.optimizer.learn_rate.warmup_steps = 250): the rate never passes 16% ")
    assert warning.endswith(f"Fit the schedule to the budget with {FIT}, or give more steps.")


def test_a_budget_past_the_warm_up_that_ends_the_schedule_is_not_named(textcat_config):
    fitted = {"training.max_steps": 40, "training.optimizer.learn_rate.warmup_steps": 4,
              "training.optimizer.learn_rate.total_steps": 40}
    assert config_budget_warnings(textcat_config, fitted, "the runs") == []
    assert config_budget_warnings(textcat_config, {"training.max_steps": 12000}, "the runs") == []
    # past the warm-up, but a tenth of the schedule's length: its decay is never reached
    (warning,) = config_budget_warnings(textcat_config, {"training.max_steps": 2000}, "the runs")
    assert "at 10.0% of the schedule's training.optimizer.learn_rate.total_steps = 20000" in warning
    assert "--training.optimizer.learn_rate.warmup_steps 200 --training.optimizer.learn_rate.total_steps 2000" \
        in warning


def test_any_schedule_naming_its_steps_is_read():
    config = {"training": {"max_steps": 100, "optimizer": {"learn_rate": {
        "@schedules": "plateau.v1", "schedule": {"@schedules": "warmup_linear.v1", "warmup_steps": 300,
                                                 "total_steps": 1000, "initial_rate": 5e-5}}}}}
    (problem,) = budget_problems(config)
    assert problem["warmup_path"] == "training.optimizer.learn_rate.schedule.warmup_steps"
    assert (problem["warmup_steps"], problem["total_steps"]) == (300, 1000)
    assert budget_problems({"training": {"max_steps": 0, "optimizer": {"learn_rate": {"warmup_steps": 9}}}}) == []
    assert budget_problems({"training": {"max_steps": 40, "optimizer": {"learn_rate": 0.001}}}) == []


def test_ab_warns_before_training(textcat_config, tiny_bert, tmp_path):
    configs = tmp_path / "configs"
    configs.mkdir()
    for arm in ("vanilla", "sla"):
        (configs / f"{arm}.cfg").write_text(textcat_config.read_text(encoding="utf8"), encoding="utf8")
    write_manifest(configs, {arm: configs / f"{arm}.cfg" for arm in ("vanilla", "sla")}, transformer="transformer")
    train, dev = write_data(tmp_path)
    args = ab_args(configs, tmp_path / "out", train, dev, "--dry-run", "--components.transformer.model.name",
                   str(tiny_bert))
    result = CliRunner().invoke(app, [*args, "--training.max_steps", "40"])
    assert result.exit_code == 0, result.output
    assert "[SLA-W018]" in result.output and FIT in " ".join(result.output.split())
    result = CliRunner().invoke(app, [*args, *f"--training.max_steps 40 {FIT}".split()])
    assert result.exit_code == 0, result.output
    assert "[SLA-W018]" not in result.output


def test_a_curve_rising_at_its_last_evaluation_is_named():
    assert rising_at_the_end({0: 0.1, 20: 0.3, 40: 0.5}) == (40, 0.3, 0.5)
    assert rising_at_the_end({0: 0.1, 20: 0.6, 40: 0.5}) is None
    assert rising_at_the_end({0: 0.1, 20: 0.5, 40: 0.5}) is None  # flat at the end
    assert rising_at_the_end({40: 0.5}) is None
    curves = {"vanilla": {0: 0.1, 40: 0.2}, "sla": {0: 0.3, 20: 0.4, 40: 0.35}, "window": {0: 0.1, 40: 0.45}}
    (warning,) = rising_curve_warnings(curves, ["vanilla", "sla", "window"], " at training size 500")
    assert warning.startswith("[SLA-W019] The main score's dev curve (mean over seeds) still rises at the last "
                              "evaluation for vanilla (10.00 at best before, 20.00 at step 40), window (10.00 at best "
                              "before, 45.00 at step 40) at training size 500:")
    assert rising_curve_warnings({"vanilla": {0: 0.3, 40: 0.2}}, ["vanilla"], "") == []
