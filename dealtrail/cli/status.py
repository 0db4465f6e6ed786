"""The command line: ``dealtrail status``, the consumer groups' lag and members and the
projector's position, read from the broker itself (no Kafka command-line tools needed)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from dealtrail.cli.common import _fail, app, console, load

if TYPE_CHECKING:
    from dealtrail.settings import Settings
    from streams.lag import GroupLag


def read_groups(settings: Settings) -> list[GroupLag]:
    """The worker group (on the events topic) and the projector group (on every topic it has
    committed) of this namespace, as the broker has them.

    Raises:
        kafka.errors.KafkaError: the cluster did not answer.
    """
    from streams.lag import LagReader

    topics = settings.topics
    logging.getLogger("kafka.admin").setLevel(logging.ERROR)  # Faust's own assignment data does not decode
    reader = LagReader(settings.kafka, "dealtrail-status")
    try:
        worker = reader.read([topics.app_id], [topics.events.name])
        projector = reader.read([topics.projector_group], [topics.events.name, topics.findings.name])
    finally:
        reader.close()
    return worker + projector


def status_json(groups: list[GroupLag]) -> dict[str, object]:
    """``dealtrail status --json``: per group its state, lag, members and partitions."""
    return {
        "groups": [
            {
                "group": g.group,
                "state": g.state,
                "lag": g.lag,
                "members": [
                    {"client_id": m.client_id, "host": m.host, "partitions": [list(p) for p in m.partitions]}
                    for m in g.members
                ],
                "partitions": [
                    {"topic": p.topic, "partition": p.partition, "committed": p.committed, "end": p.end, "lag": p.lag}
                    for p in g.partitions
                ],
            }
            for g in groups
        ]
    }


@app.command()
def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts) instead of tables.")] = False,
) -> None:
    """Print each consumer group's lag per partition, its members and the projector's position, from the broker."""
    settings = load()
    try:
        groups = read_groups(settings)
    except Exception as exc:
        raise _fail(
            f"cannot read the consumer groups at {settings.kafka.bootstrap}: {type(exc).__name__}: {exc}", 1
        ) from None
    if as_json:
        console.print_json(json.dumps(status_json(groups)))
        return
    names = {settings.topics.app_id: "workers", settings.topics.projector_group: "projector"}
    for g in groups:
        people = "no member" if not g.members else f"{len(g.members)} member" + ("s" if len(g.members) > 1 else "")
        console.print(
            f"[bold]{names.get(g.group, g.group)}[/]: consumer group {g.group} ({g.state}, {people}), "
            f"lag {g.lag:,} records",
            soft_wrap=True,
        )
        for m in g.members:
            held = ", ".join(f"{t}[{p}]" for t, p in m.partitions) or "partitions not listed"
            console.print(f"  member {m.client_id} on {m.host or '?'}: {held}", soft_wrap=True, markup=False)
        table = Table("topic", "partition", "committed (position)", "end", "lag", box=None, pad_edge=False)
        for p in g.partitions:
            table.add_row(
                p.topic,
                str(p.partition),
                "-" if p.committed is None else f"{p.committed:,}",
                f"{p.end:,}",
                f"{p.lag:,}",
            )
        console.print(table)
