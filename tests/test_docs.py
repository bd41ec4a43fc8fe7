"""docs/reference.md lists every coded error and warning, and no other."""
import re
from pathlib import Path

from spacy_sla.errors import Errors, Warnings

ROOT = Path(__file__).parent.parent


def defined_codes():
    return sorted(
        name for cls in (Errors, Warnings) for name in vars(cls) if re.fullmatch(r"[EW]\d{3}", name)
    )


def test_every_error_and_warning_code_is_in_the_reference():
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf8")
    codes = defined_codes()
    assert "E001" in codes and "W001" in codes
    missing = [code for code in codes if f"[SLA-{code}]" not in reference]
    assert missing == []


def test_the_reference_names_no_code_that_does_not_exist():
    reference = (ROOT / "docs" / "reference.md").read_text(encoding="utf8")
    named = set(re.findall(r"\[SLA-([EW]\d{3})\]", reference))
    assert sorted(named - set(defined_codes())) == []

