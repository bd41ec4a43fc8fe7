"""`python -m replication COMMAND ...` from the repository root."""
from .cli import app

app(prog_name="python -m replication")
