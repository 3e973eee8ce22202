"""The deployed retry workflow is the ASL file itself, with the substitutions `statemachine.render` fills."""

from __future__ import annotations

import json
from typing import Any

import pytest

import statemachine
from stacks.constructs.retry_workflow import MissingSubstitution, definition_substitutions
from tests.support.synth import Synthesized


def _state_machine(synthesized: Synthesized) -> dict[str, Any]:
    (props,) = synthesized.properties("AWS::StepFunctions::StateMachine")
    return props


def _token(value: Any) -> str:
    """A stable stand-in for a CloudFormation value: the same on both sides of the comparison."""
    return "<<" + json.dumps(value, sort_keys=True).replace('"', "'") + ">>"


def test_the_template_definition_is_the_asl_file_rendered(synthesized: Synthesized) -> None:
    props = _state_machine(synthesized)
    # DefinitionBody.from_file uploads the file as an asset: what CloudFormation deploys is that file.
    asset_key = props["DefinitionS3Location"]["Key"]
    deployed_text = synthesized.asset_path(asset_key.removesuffix(".json")).read_text()
    substitutions = props["DefinitionSubstitutions"]
    assert sorted(substitutions) == sorted(statemachine.SUBSTITUTIONS)

    tokens = {name: _token(value) for name, value in substitutions.items()}
    deployed = deployed_text
    for name, token in tokens.items():
        deployed = deployed.replace("${" + name + "}", token)  # what CloudFormation's substitution does
    assert json.loads(deployed) == json.loads(statemachine.render(tokens))


def test_the_substitutions_point_at_the_right_resources(synthesized: Synthesized) -> None:
    substitutions = _state_machine(synthesized)["DefinitionSubstitutions"]
    assert substitutions["Partition"] == {"Ref": "AWS::Partition"}
    assert substitutions["DeadLetterQueueUrl"]["Ref"].startswith("QueuesDeadLetterQueue")
    # No delivery queue is written into the definition: an execution's input names its shard's (`queue_url`).
    assert "DeliveryQueueUrl" not in substitutions


def test_the_workflow_is_standard_and_logged(synthesized: Synthesized) -> None:
    """Its log level and tracing: tests/infrastructure/test_logging_and_tracing.py."""
    props = _state_machine(synthesized)
    assert props["StateMachineType"] == "STANDARD"
    assert props["LoggingConfiguration"]["Destinations"]


def test_a_missing_substitution_value_fails_synth() -> None:
    values = {name: "x" for name in statemachine.SUBSTITUTIONS}
    dropped = statemachine.SUBSTITUTIONS[-1]
    del values[dropped]
    with pytest.raises(MissingSubstitution, match=dropped):
        definition_substitutions(values)


def test_substitutions_are_exactly_the_declared_ones() -> None:
    values = {name: "x" for name in statemachine.SUBSTITUTIONS} | {"Unused": "y"}
    assert sorted(definition_substitutions(values)) == sorted(statemachine.SUBSTITUTIONS)
