"""What training configs name besides the model: the corpus reader that
puts a treebank's gold trees on the Docs (`spacy-sla.GoldSyntaxCorpus.v1`,
corpora.py) and the logger that shows the auxiliary loss of LISA-style
training (`spacy-sla.ConsoleLogger.v1`, loggers.py), and the logger that
writes a run's progress as JSON lines for `spacy sla ab`
(`spacy-sla.ProgressLogger.v1`, progress_logger.py): spaCy loads every
logger's entry point when it fills any config, so the logger lives here and
not in the A/B tool, which `spacy.blank` must not import."""
