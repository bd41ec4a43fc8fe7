"""The user's config as init-config reads it: its transformer component,
the components that listen to it, and a parser added before it (sourced,
frozen and annotating) with the entity guard a transition-based ner needs."""
import copy

import pytest
from spacy.cli.init_config import init_config
from thinc.api import Config

from spacy_sla.tools.init_config.user_config import (
    ParserSource,
    check_listened_to,
    find_transformer,
    inspect_parser,
    is_parser,
    listens_to,
    usable_parsers,
    with_parse,
)

SMALL_PARSER = ParserSource(pipeline="en_core_web_sm", component="parser", lang="en", listens=True,
                            score_keys=("dep_uas", "dep_las", "sents_f"))


def user_config(pipeline: str, gpu: bool = True) -> Config:
    """What `spacy init config --pipeline PIPELINE --gpu` writes, uninterpolated."""
    config = init_config(lang="en", pipeline=[pipeline], optimize="efficiency", gpu=gpu, pretraining=False)
    return Config().from_str(config.to_str(), interpolate=False)


def test_the_transformer_is_found_by_its_factory_and_architecture():
    config = user_config("tagger")
    assert find_transformer(config) == "transformer"
    config["components"]["trf"] = config["components"].pop("transformer")
    assert find_transformer(config) == "trf" and find_transformer(config, "trf") == "trf"
    with pytest.raises(ValueError, match=r"\[SLA-E030\].*\('transformer' is not one of them\)"):
        find_transformer(config, "transformer")
    two = copy.deepcopy(config)
    two["components"]["other"] = copy.deepcopy(two["components"]["trf"])
    with pytest.raises(ValueError, match=r"\[SLA-E030\]"):
        find_transformer(two)
    assert find_transformer(two, "other") == "other"
    with pytest.raises(ValueError, match=r"\[SLA-E030\]"):
        find_transformer(user_config("tagger", gpu=False))
    sourced = user_config("tagger")
    sourced["components"]["transformer"] = {"source": "en_core_web_trf"}
    with pytest.raises(ValueError, match=r"\[SLA-E060\]"):
        find_transformer(sourced)


def test_listeners_and_parsers_are_told_by_their_blocks():
    config = user_config("tagger")
    tagger = config["components"]["tagger"]
    assert tagger["model"]["tok2vec"]["upstream"] == "*"  # any transformer
    assert listens_to(tagger, "transformer") and listens_to(tagger, "other")
    named = copy.deepcopy(tagger)
    named["model"]["tok2vec"]["upstream"] = "transformer"
    assert listens_to(named, "transformer") and not listens_to(named, "other")
    assert not listens_to(config["components"]["transformer"], "transformer")
    check_listened_to(config, "transformer")
    del config["components"]["tagger"]
    with pytest.raises(ValueError, match=r"\[SLA-E035\]"):
        check_listened_to(config, "transformer")
    assert is_parser("dep", {"factory": "beam_parser"}) and is_parser("parser", {"source": "en_core_web_sm"})
    assert not is_parser("parser", {"source": "en_core_web_sm", "component": "tagger"})
    assert not is_parser("tagger", {"factory": "tagger"})
    listening = user_config("parser")
    assert usable_parsers(listening, "transformer") == []  # it listens to the transformer: it cannot parse first


def test_a_sourced_parser_is_added_before_the_transformer():
    config = user_config("tagger")
    config["training"]["score_weights"] = {"tag_acc": 1.0}
    parsed, added = with_parse(config, "transformer", SMALL_PARSER)
    assert added == "parser"
    assert parsed["nlp"]["pipeline"] == ["parser", "transformer", "tagger"]
    assert parsed["components"]["parser"] == {"source": "${paths.parser}", "replace_listeners": ["model.tok2vec"]}
    assert parsed["paths"]["parser"] == "en_core_web_sm"
    assert parsed["training"]["frozen_components"] == ["parser"]
    assert parsed["training"]["annotating_components"] == ["parser"]
    assert parsed["training"]["score_weights"] == {"tag_acc": 1.0, "dep_uas": None, "dep_las": None, "sents_f": None}
    assert "parser" not in config["components"]  # the user's config is left as it was


def test_a_transition_based_ner_gets_the_entity_guard_after_the_parser():
    parsed, _ = with_parse(user_config("ner"), "transformer", SMALL_PARSER)
    assert parsed["nlp"]["pipeline"] == ["parser", "sla_entity_guard", "transformer", "ner"]
    assert parsed["components"]["sla_entity_guard"] == {"factory": "sla_entity_guard"}


def test_a_parser_of_another_language_or_none_is_refused():
    config = user_config("tagger")
    config["nlp"]["lang"] = "de"
    with pytest.raises(ValueError, match=r"\[SLA-E034\] The config's language is 'de'"):
        with_parse(config, "transformer", SMALL_PARSER)
    with pytest.raises(ValueError, match=r"\[SLA-E033\]"):
        with_parse(user_config("tagger"), "transformer", None)
    with pytest.raises(ValueError, match=r"\[SLA-E033\].*'en_core_web_nosuch'"):
        inspect_parser("en_core_web_nosuch")
