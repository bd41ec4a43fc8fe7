"""The registry of attention variants: every shipped variant's blocks are a
transformer component; a variant of one's own, registered as a user
registers it (a builder in @misc and register_variant in the file given to
--code), is offered by init-config and used in the forward pass; bad
registrations and unknown names are refused with a code."""
import numpy
import pytest
import spacy
from spacy.cli.init_config import init_config
from thinc.api import Config
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)
import spacy_sla.variants.registry as registry_module
from spacy_sla.variants import Variant, get_variant, register_variant, sla_transformer, variant_names

from util import english_vocab, the_cat_sat

SHIPPED = ["depscale", "lisa", "logthreshold", "sgnet", "sla", "sla-noneighbours", "sla-nopunct", "softbias",
           "vanilla", "window"]


# A variant of one's own, as a user writes it in the file given to `--code`.
TOY_VARIANT = '''
import numpy
from spacy.util import registry

from spacy_sla.variants import register_variant, sla_transformer


class NextWordMask:
    """Each token sees itself and the token after it."""

    def __call__(self, doclike):
        n = len(doclike)
        return numpy.eye(n, dtype=bool) | numpy.eye(n, k=1, dtype=bool)


@registry.misc("test.next_word_mask.v1")
def create_next_word_mask():
    return NextWordMask()


register_variant("next-word", "Each token sees the next one.", sla_transformer() + """
[components.transformer.model.mask]
@misc = "test.next_word_mask.v1"
""")
'''
TOY_BLOCK = sla_transformer() + """
[components.transformer.model.mask]
@misc = "spacy-sla.window_mask.v1"
"""


@pytest.fixture
def variants(monkeypatch):
    """The registry as it is, given back after the test."""
    monkeypatch.setattr(registry_module, "_VARIANTS", dict(registry_module._VARIANTS))


def test_every_shipped_variant_is_a_transformer_component():
    assert variant_names() == SHIPPED
    for name in SHIPPED:
        block = get_variant(name).transformer_block()
        assert block["factory"] == ("transformer" if name == "vanilla" else "sla_transformer")
        assert block["model"]["@architectures"] in ("spacy-transformers.TransformerModel.v3",
                                                    "spacy-sla.SLATransformerModel.v1")
    assert get_variant("logthreshold").transformer_block()["model"]["mask"]["@misc"] == \
        "spacy-sla.threshold_log_bias.v1"
    assert get_variant("depscale").text().startswith("# The authors' soft threshold")


def test_a_toy_variant_is_offered_by_init_config_and_used_in_the_forward_pass(variants, tmp_path, tiny_bert):
    (tmp_path / "toy_variant.py").write_text(TOY_VARIANT, encoding="utf8")
    # a user's tagger config with its own parser, which init-config moves before the transformer
    user = init_config(lang="en", pipeline=["tagger", "parser"], optimize="efficiency", gpu=True)
    user.to_disk(tmp_path / "user.cfg")
    result = CliRunner().invoke(spacy.cli.app, ["sla", "init-config", str(tmp_path / "user.cfg"),
                                                str(tmp_path / "configs"), "--variants", "next-word",
                                                "--code", str(tmp_path / "toy_variant.py")])
    assert result.exit_code == 0, result.output
    assert "next-word" in variant_names()
    written = Config().from_disk(tmp_path / "configs" / "next-word.cfg", interpolate=False)
    block = written["components"]["transformer"]
    assert block["factory"] == "sla_transformer" and block["model"]["mask"] == {"@misc": "test.next_word_mask.v1"}
    assert block["model"]["name"] == user["components"]["transformer"]["model"]["name"]

    nlp = spacy.blank("en", vocab=english_vocab())
    nlp.add_pipe("sla_transformer", config={"model": {**block["model"], "name": str(tiny_bert)}, "store_gates": True})
    nlp.initialize()
    doc = nlp(the_cat_sat(nlp.vocab))
    assert doc._.trf_data.model_output.last_hidden_state.shape[-1] == 32
    assert not numpy.isnan(doc._.sla_gates).any()  # every layer's local branch ran on the Doc
    (mask,) = nlp.get_pipe("sla_transformer").local_masks([the_cat_sat(nlp.vocab)])
    # one wordpiece per token here; [CLS] and [SEP] see and are seen by everything
    n = len(doc)
    assert (mask[1:-1, 1:-1] == (numpy.eye(n, dtype=bool) | numpy.eye(n, k=1, dtype=bool))).all()
    assert mask[0].all() and mask[:, -1].all()


@pytest.mark.parametrize("name,config,problem", [
    ("has space", TOY_BLOCK, "stem of its config file"),
    ("sla", TOY_BLOCK, "another variant has this name"),
    ("no-model", "[components]\n\n[components.transformer]\nfactory = \"sla_transformer\"\n", "needs a factory"),
    ("broken", "[components.transformer\n", "cannot be read"),
])
def test_a_bad_registration_is_refused(variants, name, config, problem):
    with pytest.raises(ValueError, match=rf"\[SLA-E121\].*{problem}"):
        register_variant(name, "a test", config)


def test_registering_the_same_variant_again_changes_nothing(variants):
    window = get_variant("window")
    assert register_variant("window", window.description, window.config) == window == Variant(*vars(window).values())


def test_an_unknown_variant_is_refused_with_the_registered_ones():
    with pytest.raises(ValueError, match=r"\[SLA-E032\].*'nope'.*depscale, lisa"):
        get_variant("nope")
