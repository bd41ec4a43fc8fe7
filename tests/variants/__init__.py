"""Tests of spacy_sla/variants: each variant's builder, layer module and
blocks (test_<variant>.py), and the registry of variants."""
