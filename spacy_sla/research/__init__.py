"""Tooling for the paper's experiments: task definitions, data converters,
experiment runs and comparisons, benchmark and profiling. The plugin itself
never imports this package; the `spacy sla` commands do."""
