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
