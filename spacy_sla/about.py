__title__ = "spacy-sla"
__version__ = "0.1.0"
