"""`python -m lab COMMAND ...` from the repository root."""
from .cli import app

app(prog_name="python -m lab")
