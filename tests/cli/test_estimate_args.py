"""``estimate_cmd`` hands its parameters on as ``EstimateArgs(**locals())``: the value's fields
must be the command's parameters, in order, with the same types."""

from __future__ import annotations

import dataclasses
import inspect
import typing

from accelmap.cli import estimate


def test_estimate_args_are_the_commands_parameters() -> None:
    params = inspect.signature(estimate.estimate_cmd).parameters
    fields = dataclasses.fields(estimate.EstimateArgs)
    assert [f.name for f in fields] == list(params)
    hints = typing.get_type_hints(estimate.EstimateArgs)
    cmd = typing.get_type_hints(estimate.estimate_cmd)
    for name in params:  # get_type_hints drops the command's Annotated[..., typer.Option]
        assert cmd[name] == hints[name], name
