"""The shipped attention variants and the options of `spacy sla
init-config` each of them takes."""
import pytest

from spacy_sla.tools.init_config.variant_blocks import parse_sla_layers, takes_option
from spacy_sla.variants import variant_names


def test_every_shipped_variant_is_offered():
    assert {"vanilla", "sla", "window", "sgnet", "lisa", "softbias", "logthreshold", "depscale"} <= set(variant_names())


def test_each_option_reaches_only_the_variants_whose_blocks_have_it():
    assert [option for option in ("threshold", "window", "punct_rule", "sla_layers")
            if takes_option("sla", option)] == ["threshold", "punct_rule", "sla_layers"]
    assert [option for option in ("threshold", "window", "punct_rule", "sla_layers")
            if takes_option("window", option)] == ["window", "punct_rule", "sla_layers"]
    assert not takes_option("lisa", "threshold") and takes_option("lisa", "sla_layers")


def test_sla_layers_are_whole_numbers_separated_by_commas():
    assert parse_sla_layers("0,2,-1") == [0, 2, -1]
    assert parse_sla_layers("3") == [3]
    with pytest.raises(ValueError, match=r"\[SLA-E059\].*--sla-layers '0,x'"):
        parse_sla_layers("0,x")
