"""docs/reference.md lists every coded error and warning of the wheel, and
no other; replication/README.md lists the replication's."""
import re

from codes import REPLICATION_ERROR_MODULE, ROOT, WHEEL_ERROR_MODULES, coded


def listed(path, prefix):
    return set(re.findall(rf"\[{prefix}-([EW]\d{{3}})\]", path.read_text(encoding="utf8")))


def test_every_code_of_the_wheel_is_in_the_reference_and_no_other():
    defined = {code for _, code in coded(WHEEL_ERROR_MODULES)}
    assert {"E001", "W001", "E030", "E076"} <= defined
    assert sorted(listed(ROOT / "docs" / "reference.md", "SLA")) == sorted(defined)


def test_every_code_of_the_replication_is_in_its_readme_and_no_other():
    defined = {code for _, code in coded([REPLICATION_ERROR_MODULE])}
    assert {"E015", "E020", "E070"} <= defined
    assert sorted(listed(ROOT / "replication" / "README.md", "SLA-LAB")) == sorted(defined)


def listed_families(path, start: str) -> set:
    """The `names` of the sentence of a document that begins with start."""
    text = path.read_text(encoding="utf8")
    assert start in text, f"{path.name} no longer lists the encoder families after {start!r}"
    sentence = text[text.index(start):]
    sentence = sentence[: re.search(r"\.(\s|$)", sentence).end()]
    return set(re.findall(r"`([\w-]+)`", sentence))


def test_the_docs_list_the_encoder_families_the_code_wraps():
    from spacy_sla.layers import ATTENTION_FAMILIES

    for path, start in [(ROOT / "README.md", "Supported encoders"),
                        (ROOT / "CHANGELOG.md", "Encoders of the model types"),
                        (ROOT / "docs" / "reference.md", "Supported model types")]:
        assert listed_families(path, start) == set(ATTENTION_FAMILIES), path.name
