"""The coded errors and warnings: every message carries its code, prefixed
so that it cannot be taken for one of spaCy's, and formats with the fields it
names."""
import string
from typing import List

import pytest

from spacy_sla.errors import Errors, Warnings


def codes(table: type) -> List[str]:
    return sorted(name for name in vars(table) if name[:1] in "EW" and name[1:].isdigit())


def fields(template: str) -> List[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


ALL = [(table, code) for table in (Errors, Warnings) for code in codes(table)]


def test_there_are_errors_and_warnings():
    assert len(codes(Errors)) >= 70 and codes(Warnings) == ["W001", "W003", "W004", "W005", "W010", "W013"]
    assert all(code.startswith("E") for code in codes(Errors))
    assert all(code.startswith("W") for code in codes(Warnings))


@pytest.mark.parametrize("table,code", ALL, ids=[code for _, code in ALL])
def test_each_message_formats_with_its_fields_and_shows_its_code(table, code):
    message = getattr(table, code)
    assert message.startswith(f"[SLA-{code}] ")
    formatted = message.format(**{name: f"<{name}>" for name in fields(message)})
    for name in fields(message):
        assert f"<{name}>" in formatted


def test_a_code_of_ours_never_reads_as_spacys():
    from spacy.errors import Errors as SpacyErrors

    assert SpacyErrors.E024.startswith("[E024] ") and Errors.E024.startswith("[SLA-E024] ")
    assert all(not getattr(table, code).startswith(f"[{code}]") for table, code in ALL)
