"""What training configs name besides the model: the corpus reader that
puts a treebank's gold trees on the Docs (`spacy-sla.GoldSyntaxCorpus.v1`,
corpora.py) and the logger that shows the auxiliary loss of LISA-style
training (`spacy-sla.ConsoleLogger.v1`, loggers.py)."""
