"""Performance measurements of spacy-sla that are not a user command; run from the
repository root as `python -m performance.NAME ...`."""
