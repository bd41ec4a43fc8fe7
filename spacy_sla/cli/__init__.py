"""`python -m spacy sla ...`: registered through spaCy's `spacy_cli` entry
point, so the commands sit beside spaCy's own."""
from spacy.cli._util import app

from ._app import sla_cli
from . import baseline, benchmark, inspect, workflow  # noqa: F401  (registers the commands)
from . import annotate  # noqa: F401  (`spacy sla annotate`, batch annotation)

app.add_typer(sla_cli)

__all__ = ["sla_cli"]
