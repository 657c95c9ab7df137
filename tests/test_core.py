"""Core types: content-hashed task ids, action parsing, reward policies."""

import pytest
from pydantic import ValidationError

from gymsmith.core import Action, RewardComponent, StartStateRef, TaskSpec
from gymsmith.verifier.policies import apply_policy, get_policy
from gymsmith.verifier.protocol import CheckResult


def _task(**over):
    base = dict(family="f", family_version="1", seed=1, knobs={"difficulty": 0.5}, goal="g",
                start_state=StartStateRef(kind="generated", digest="d"), tools=())
    return TaskSpec(**{**base, **over})


def test_task_id_is_a_content_hash():
    assert _task().id == _task().id
    assert _task(goal="other").id != _task().id
    assert _task(family_version="2").id != _task().id
    assert _task(seed=2).id != _task().id


def test_task_round_trips_and_detects_edits():
    t = _task()
    data = t.model_dump(mode="json")
    assert TaskSpec.model_validate(data) == t
    data["goal"] = "tampered"
    with pytest.raises(ValidationError, match="does not match its content"):
        TaskSpec.model_validate(data)


def test_difficulty_must_be_in_unit_range():
    with pytest.raises(ValidationError, match="difficulty"):
        _task(knobs={"difficulty": 1.5})


def test_action_keeps_raw_json_text():
    assert Action(tool="t", arguments='{"a": 1').arguments_text() == '{"a": 1'
    assert Action(tool="t", arguments={"b": 2, "a": 1}).arguments_text() == '{"a": 1, "b": 2}'


def test_reward_policies():
    result = CheckResult(components={"a": RewardComponent(value=0.8, weight=3), "b": RewardComponent(value=0.0, weight=1)},
                         gate_failures=["b failed"])
    assert apply_policy(result, "shaped").value == pytest.approx(0.6)
    assert apply_policy(result, "sparse").value == 0.0
    assert apply_policy(result, "shaped_gated").value == 0.5  # capped until the gate passes
    passed = CheckResult(components=result.components)
    assert apply_policy(passed, "shaped_gated").value == pytest.approx(0.6)
    assert apply_policy(passed, "sparse").value == 1.0
    with pytest.raises(ValueError, match="unknown reward policy 'nope'.*shaped_gated"):
        get_policy("nope")
