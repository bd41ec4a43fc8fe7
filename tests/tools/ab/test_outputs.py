"""The plan and report files of `spacy sla ab`: recorded by SHA-256 when
ab writes them, replaced only while they are as ab wrote them."""
import json

import pytest

from spacy_sla.tools.ab.outputs import (
    AB_FILES,
    INTERIM_FILES,
    INTERIM_REPORT,
    PLAN,
    check_outputs,
    foreign_outputs,
    record_outputs,
    remove_outputs,
    report_names,
)


def test_the_report_has_a_markdown_a_json_and_a_figure_file():
    assert report_names() == ["report.md", "report.json", "report.png"]
    assert report_names("report-interim") == ["report-interim.md", "report-interim.json", "report-interim.png"]


def test_only_files_ab_recorded_as_they_are_may_be_replaced(tmp_path):
    names = report_names()
    assert foreign_outputs(tmp_path, names) == []  # nothing there yet
    (tmp_path / "report.md").write_text("my own notes\n", encoding="utf8")
    assert foreign_outputs(tmp_path, names) == ["report.md"]
    with pytest.raises(ValueError, match=r"\[SLA-E064\].*report\.md"):
        check_outputs(tmp_path, names)
    (tmp_path / "report.json").write_text("{}", encoding="utf8")
    record_outputs(tmp_path, [tmp_path / "report.md", tmp_path / "report.json"])
    check_outputs(tmp_path, names)
    recorded = json.loads((tmp_path / AB_FILES).read_text(encoding="utf8"))
    assert sorted(recorded) == ["report.json", "report.md"]
    (tmp_path / "report.json").write_text('{"edited": true}', encoding="utf8")
    assert foreign_outputs(tmp_path, names) == ["report.json"]
    # the interim report keeps a record of its own
    assert foreign_outputs(tmp_path, names, record=INTERIM_FILES) == ["report.md", "report.json"]


def test_a_plan_of_an_ab_that_kept_no_record_is_its_own(tmp_path):
    plan = {"reference": "vanilla", "config_dir": "configs", "variants": ["sla"], "configs": {}}
    (tmp_path / PLAN).write_text(json.dumps(plan), encoding="utf8")
    (tmp_path / "report.md").write_text("an older ab's report\n", encoding="utf8")
    assert foreign_outputs(tmp_path, [PLAN, *report_names()]) == []
    (tmp_path / PLAN).write_text(json.dumps({"reference": "vanilla"}), encoding="utf8")
    assert foreign_outputs(tmp_path, [PLAN, *report_names()]) == [PLAN, "report.md"]


def test_remove_outputs_deletes_only_what_ab_wrote_and_keeps_the_record_of_the_rest(tmp_path):
    names = report_names(INTERIM_REPORT)
    for name in names:
        (tmp_path / name).write_text(f"interim {name}\n", encoding="utf8")
    record_outputs(tmp_path, [tmp_path / name for name in names], record=INTERIM_FILES)
    (tmp_path / "report-interim.md").write_text("my notes on the interim report\n", encoding="utf8")
    assert remove_outputs(tmp_path, names, INTERIM_FILES) == ["report-interim.json", "report-interim.png"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [INTERIM_FILES, "report-interim.md"]
    assert list(json.loads((tmp_path / INTERIM_FILES).read_text(encoding="utf8"))) == ["report-interim.md"]
    (tmp_path / INTERIM_FILES).unlink()  # without a record nothing is known to be ab's
    assert remove_outputs(tmp_path, names, INTERIM_FILES) == [] and (tmp_path / "report-interim.md").exists()
