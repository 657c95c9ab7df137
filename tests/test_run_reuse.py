"""Resuming a run id (`runner.reuse.check_reuse`): what the rollouts depend on must match, how they are run may
change. Found in review: the group size was not compared (a resume with another --group mixed groups), and a
moved model server refused `--retry-errors`."""

import pytest

from gymsmith.runner.reuse import RunReuseError, check_reuse

STORED = {"purpose": "train", "taskset": {"family": "ops", "count": 3}, "agents": ["model"], "seeds": 2, "group": 4,
          "max_steps": 50, "policy": "progress_gated", "concurrency": 2,
          "model": {"base_url": "http://127.0.0.1:8000/v1", "model": "m", "temperature": 1.0, "timeout_s": 60}}


def test_a_different_group_size_or_model_is_refused_by_name():
    with pytest.raises(RunReuseError, match="recorded with group 4, not 8"):
        check_reuse("r", STORED, {**STORED, "group": 8})
    with pytest.raises(RunReuseError, match='recorded with model "m", not "other"'):
        check_reuse("r", STORED, {**STORED, "model": {**STORED["model"], "model": "other"}})


def test_a_moved_server_and_operational_settings_may_change():
    check_reuse("r", STORED, {**STORED, "concurrency": 8,
                              "model": {**STORED["model"], "base_url": "http://10.0.0.2:9000/v1", "timeout_s": 5}})
    check_reuse("r", None, STORED)  # a new run
