"""The coded errors and warnings: every message carries its code, prefixed
so that it cannot be taken for one of spaCy's, and formats with the fields it
names; a number is used once, across the core, the tools and the
replication."""
import string
from collections import Counter
from typing import List

import pytest
from codes import REPLICATION_ERROR_MODULE, WHEEL_ERROR_MODULES, coded, codes, prefix

from spacy_sla.errors import Errors, Warnings


def fields(template: str) -> List[str]:
    return [name for _, name, _, _ in string.Formatter().parse(template) if name]


ALL = coded([*WHEEL_ERROR_MODULES, REPLICATION_ERROR_MODULE])


def test_the_core_and_each_tool_have_their_codes():
    assert WHEEL_ERROR_MODULES == ["spacy_sla.errors", "spacy_sla.tools.ab.errors",
                                   "spacy_sla.tools.annotation.errors", "spacy_sla.tools.init_config.errors",
                                   "spacy_sla.tools.inspection.errors", "spacy_sla.tools.support.errors"]
    assert len(codes(Errors)) >= 25 and codes(Warnings) == ["W001", "W003", "W004", "W005", "W013", "W014", "W016"]
    assert all(code.startswith("E") for table, code in ALL if table.__name__ == "Errors")
    assert all(code.startswith("W") for table, code in ALL if table.__name__ == "Warnings")


def test_a_number_is_used_once():
    assert [code for code, count in Counter(code for _, code in ALL).items() if count > 1] == []


@pytest.mark.parametrize("table,code", ALL, ids=[f"{table.__module__}.{code}" for table, code in ALL])
def test_each_message_formats_with_its_fields_and_shows_its_code(table, code):
    message = getattr(table, code)
    assert message.startswith(f"[{prefix(table)}-{code}] ")
    formatted = message.format(**{name: f"<{name}>" for name in fields(message)})
    for name in fields(message):
        assert f"<{name}>" in formatted


def test_the_replication_has_a_prefix_of_its_own():
    from replication.errors import Errors as ReplicationErrors

    assert ReplicationErrors.E020.startswith("[SLA-REPLICATION-E020] ") and Errors.E001.startswith("[SLA-E001] ")


def test_a_code_of_ours_never_reads_as_spacys():
    from spacy.errors import Errors as SpacyErrors

    from spacy_sla.tools.inspection.errors import Errors as InspectionErrors

    assert SpacyErrors.E024.startswith("[E024] ") and InspectionErrors.E024.startswith("[SLA-E024] ")
    assert all(not getattr(table, code).startswith(f"[{code}]") for table, code in ALL)
