"""`python -m spacy sla ...`: registered through spaCy's `spacy_cli` entry
point, so the commands sit beside spaCy's own. Each module holds the
commands of the tool it is named after."""
from spacy.cli._util import app

from . import (  # noqa: F401  (registers the commands)
    ab,  # `spacy sla init-config` and `spacy sla ab`: your pipeline
    annotation,  # `spacy sla annotate`: batch annotation
    inspection,  # `spacy sla info`, `gates`, `mask` and `mask-stats`
    pipeline_cost,  # `spacy sla benchmark`: your config's cost
)
from ._app import sla_cli

app.add_typer(sla_cli)

__all__ = ["sla_cli"]
