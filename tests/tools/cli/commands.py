"""`spacy sla ...` run in this process, and the check of a clean failure."""
from spacy.cli._util import app
from typer.testing import CliRunner

import spacy_sla.tools.cli  # noqa: F401  (registers `sla` on spaCy's app)

runner = CliRunner()


def cli(*args: object):
    return runner.invoke(app, ["sla", *[str(arg) for arg in args]])


def failed(result, *expected: str) -> str:
    """Assert a clean failure: exit code 1 through msg.fail (SystemExit, not
    an uncaught exception), no traceback, and the expected text (with
    wasabi's line wrapping undone)."""
    output = " ".join(result.output.split())
    assert result.exit_code == 1, output
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in output
    for text in expected:
        assert text in output
    return output
