"""cdk-nag (AWS Solutions) finds nothing unacknowledged, every acknowledgment says why, and cfn-lint passes."""

from __future__ import annotations

import json

from aws_cdk import Validations
from cfnlint.api import lint_file

from scripts.rehearse import ACCEPTED_CFN_LINT
from tests.support.synth import Synthesized


def test_cdk_nag_reports_no_findings(synthesized: Synthesized) -> None:
    # The session's synth ran the AwsSolutionsChecks plugin (it fails synth on any unacknowledged finding);
    # its report is empty when nothing is left.
    report = json.loads((synthesized.outdir / "validation-report.json").read_text())
    failures = [r for r in report["pluginReports"] if r.get("summary", {}).get("status") != "success"]
    assert failures == []


def test_every_acknowledgment_names_a_rule_and_gives_a_reason(synthesized: Synthesized) -> None:
    acknowledged = {
        (path, rule): reason
        for path, entries in synthesized.metadata.items()
        for entry in entries
        if entry["type"] == Validations.ACKNOWLEDGED_RULES_METADATA_KEY
        for rule, reason in entry["data"].items()
    }
    assert acknowledged, "expected the documented acknowledgments (X-Ray wildcards, the terminal dead-letter queue)"
    for (path, rule), reason in acknowledged.items():
        assert "AwsSolutions-" in rule, (path, rule)
        assert len(reason.split()) >= 8, (path, rule, reason)


def test_cfn_lint_passes_on_the_template(synthesized: Synthesized) -> None:
    template = synthesized.outdir / f"{synthesized.stack_name}.template.json"
    findings = [match for match in lint_file(template) if match.rule.id not in ACCEPTED_CFN_LINT]
    assert [f"{match.rule.id} {match.message}" for match in findings] == []
