"""`python -m spacy sla ...`: registered through spaCy's `spacy_cli` entry
point, so the commands sit beside spaCy's own. Each module holds the
commands of the tool it is named after."""
from spacy.cli._util import app

from . import (  # noqa: F401  (registers the commands)
    ab,  # `spacy sla ab`: does SLA help your pipeline
    annotation,  # `spacy sla annotate`: batch annotation
    benchmark,  # `spacy sla benchmark`: your config's cost
    init_config,  # `spacy sla init-config`: your config as attention variants
    inspection,  # `spacy sla info`, `gates`, `mask` and `mask-stats`
)
from ._app import sla_cli

app.add_typer(sla_cli)

__all__ = ["sla_cli"]
