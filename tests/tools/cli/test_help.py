"""Every `spacy sla` and `python -m replication` command's --help reads as written
for the user: no placeholder of the code left unfilled."""
import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from replication.cli import app as replication_app
from spacy_sla.tools.cli import sla_cli
from spacy_sla.tools.init_config.manifest import MANIFEST

from .commands import cli

PLACEHOLDER = re.compile(r"\{[A-Za-z_]+\}")  # a name in braces: an f-string that lost its f


def command_names(app):
    return sorted(get_command(app).commands)


def unfilled(help_text: str):
    """The placeholders of a help text, apart from the usage (its line and
    the lines it wraps onto, up to the first empty one), where spaCy's CLI
    shows the arguments as {name} itself."""
    found, in_usage = [], False
    for line in help_text.splitlines():
        in_usage = line.strip().startswith("Usage:") or (in_usage and bool(line.strip()))
        if not in_usage:
            found += PLACEHOLDER.findall(line)
    return found


@pytest.mark.parametrize("command", command_names(sla_cli))
def test_the_help_of_every_sla_command_has_no_unfilled_placeholder(command):
    result = cli(command, "--help")
    assert result.exit_code == 0, result.output
    assert unfilled(result.output) == []


@pytest.mark.parametrize("command", command_names(replication_app))
def test_the_help_of_every_replication_command_has_no_unfilled_placeholder(command):
    result = CliRunner().invoke(replication_app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert unfilled(result.output) == []


@pytest.mark.parametrize("command", ["init-config", "ab"])
def test_init_config_and_ab_name_the_manifest_file(command):
    output = "".join(cli(command, "--help").output.split())  # the help's line wrapping undone
    assert f"/{MANIFEST}" in output
