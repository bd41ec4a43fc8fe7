from typing import List

import typer

CODE_HELP = "A Python file with your registered functions (custom components, architectures, scorers), as `spacy train --code` takes it"

sla_cli = typer.Typer(
    name="sla",
    help="spacy-sla: attention-variant configs, A/B comparisons, cost benchmarks, annotation and inspection of syntax-aware local attention.",
    no_args_is_help=True,
)


def comma_separated(values: str) -> List[str]:
    return [value.strip() for value in values.split(",") if value.strip()]
