"""Tests of spacy_sla/syntax, one module each (test_<module>.py), and of the
graphs of unusual parses (test_parse_graphs.py)."""
