"""The tools users run on the plugin, one subpackage each (support,
inspection, init_config, ab, annotation, benchmark, cli): each uses the core
only through its public API, and `import spacy_sla` loads none of them
(tests/test_layout.py)."""
