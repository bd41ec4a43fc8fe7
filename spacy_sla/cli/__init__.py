"""`python -m spacy sla ...`: registered through spaCy's `spacy_cli` entry
point, so the commands sit beside spaCy's own."""
from spacy.cli._util import app

from . import (  # noqa: F401  (registers the commands)
    ab,  # noqa: F401  (`spacy sla init-config` and `spacy sla ab`: your pipeline)
    annotate,  # noqa: F401  (`spacy sla annotate`, batch annotation)
    benchmark,
    inspect,
)
from ._app import sla_cli

app.add_typer(sla_cli)

__all__ = ["sla_cli"]
