"""Tests of spacy_sla/layers, one module each (test_<module>.py); the
shared helpers of tests/ (util, tiny_models, reference, strategies) are on
sys.path through tests/conftest.py."""
