"""The typed requests' defaults are the CLI's (api.PlanOptions, api.CompareRequest): a field
left out of a web form means what the flag left out means."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from accelmap import api
from accelmap.cli.compare import compare_cmd
from accelmap.cli.plan import plan_cmd


@pytest.mark.parametrize(("command", "request_type"),
                         [(plan_cmd, api.PlanOptions), (compare_cmd, api.CompareRequest)])
def test_defaults_are_the_cli_defaults(command: Any, request_type: type) -> None:
    """A field left out means what the flag left out means."""
    params = inspect.signature(command).parameters
    for f in dataclasses.fields(request_type):
        if f.default is dataclasses.MISSING:  # the model: required in both
            assert params[f.name].default is inspect.Parameter.empty, f.name
        else:
            assert params[f.name].default == f.default, f.name
