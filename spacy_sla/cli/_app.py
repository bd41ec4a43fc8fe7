import typer

sla_cli = typer.Typer(
    name="sla",
    help="spacy-sla: data conversion, experiments and inspection of syntax-aware local attention.",
    no_args_is_help=True,
)
