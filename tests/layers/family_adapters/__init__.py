"""Tests of spacy_sla/layers/family_adapters, one module each: the adapters'
contract and their table (test_adapter.py), and what each adapter shape
does of its own."""
