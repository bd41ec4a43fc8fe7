"""`spacy sla benchmark CONFIG`: what SLA costs in a user's own pipeline
(config.py), and what the cost benchmarks measure with (measure.py)."""
