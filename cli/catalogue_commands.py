"""The commands that list what netfl has built in: ``algorithms`` (with server optimisers, compressors and round
options) and ``policies`` (availability), each with its parameters and papers."""

from __future__ import annotations

import re

import click


@click.command()
def algorithms() -> None:
    """List the FL algorithms, server optimisers, compressors and round options, with parameters and papers."""
    from netfl.registry.algorithms import ROUND_OPTIONS, describe_algorithms
    from netfl.registry.compression import COMPRESSORS
    from netfl.registry.server_optimizers import describe_server_optimizers

    for algo in describe_algorithms():
        needs = (
            "  (needs each client's participation probability p: bernoulli, markov or cyclic)"
            if algo["needs_participation"]
            else ""
        )
        click.echo(f"{algo['name']}: {algo['summary']}{needs}")
        _echo_params(algo["params"])
        click.echo(f"    paper: {algo['paper']}")
        click.echo()
    click.echo(
        "Server optimisers (server.optimizer: {name: NAME, ...}), on the aggregated update Delta_t of an algorithm "
        "whose step is x + Delta_t:"
    )
    for opt in describe_server_optimizers():
        click.echo(f"{opt['name']}: {opt['summary']}")
        _echo_params(opt["params"])
        click.echo(f"    paper: {opt['paper']}")
    click.echo()
    click.echo("Compression (server.compression: {uplink: ..., downlink: ...}), with any algorithm but scaffold:")
    for name, (summary, paper) in COMPRESSORS.items():
        click.echo(f"{name}: {summary}")
        click.echo(f"    paper: {paper}")
    click.echo()
    click.echo("Round options (server.round, server.mode: sync, with any algorithm above unless said otherwise):")
    for option in ROUND_OPTIONS:
        click.echo(f"{option['name']} ({option['type']}, default {option['default']}): {option['summary']}")
        click.echo(f"    paper: {option['paper']}")


def _plain(text: str) -> str:
    """A docstring's line as a terminal shows it: ``p`` (reStructuredText's literal) as `p`."""
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _echo_params(params: list[dict]) -> None:
    for param in params:
        default = "required" if param["required"] else f"default {param['default']}"
        click.echo(f"    {param['name']} ({param['type']}, {default}): {param['description'] or ''}".rstrip(": "))


@click.command()
def policies() -> None:
    """List the built-in availability policies and their parameters (each runs at any scale)."""
    from netfl.policies import BUILTIN_POLICIES
    from netfl.registry import describe_params

    for name, cls in BUILTIN_POLICIES.items():
        summary = _plain((cls.__doc__ or "").strip().splitlines()[0])
        click.echo(f"{name} ({'per round' if cls.time_base == 'round' else 'continuous time'}): {summary}")
        _echo_params(describe_params(cls.Params))
        click.echo()
    click.echo(
        "Your own: availability: {policy: path/to/file.py:ClassName, ...} (the protocols: netfl/policies/base.py, "
        "one object per device; netfl/policies/population_policy.py, a whole group at once, any engine)"
    )
