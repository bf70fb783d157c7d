"""PG001 StayingNodeKept: a node the site keeps keeps its machine and its configuration apply — judged per node,
whatever the addresses: replaced in place, deleted at one address and created at another, deleted outright or
forgotten, each is refused."""

from __future__ import annotations

from collections.abc import Iterator

from terravixens.guard.checks.base import Check
from terravixens.guard.context import GuardContext
from terravixens.guard.nodes import APPLY, Event, Fate, NodeView, node_view
from terravixens.guard.plan import Plan


def _consequence(events: list[Event]) -> str:
    """What the node would go through: the worst of its losses."""
    if any(event.action == "replaced" and event.kind == APPLY for event in events):
        return "wiped"
    if any(event.action == "replaced" for event in events):
        return "destroyed and re-created"
    if any(event.action == "deleted" and event.kind == APPLY for event in events):
        return "reset (wiped)"
    if any(event.action == "deleted" for event in events):
        return "left without a machine"
    return "left running outside Terraform"


def _headline(event: Event) -> str:
    if event.again is not None:
        gone = "forgotten" if event.change.forgets else "deleted"
        return f"{event.address} would be {gone} and {event.elsewhere} would create it again"
    return f"{event.address} would be {event.action}"


def _detail(event: Event) -> str:
    if event.again is not None:
        how = (
            "its resource type changed"
            if event.again.type != event.change.type
            else "its address changed without a `moved` block"
        )
        if event.change.forgets:
            how += "; the old one is forgotten, left running with the same identity"
        return f"its {event.label} moves from {event.address} to {event.elsewhere} ({how})"
    if event.action == "deleted":
        again = "applies it" if event.kind == APPLY else "creates it"
        return f"its {event.label} is deleted and nothing {again} again"
    if event.action == "forgotten":
        return f"its {event.label} is forgotten (a `removed` block): the next plan would create it again"
    why = event.why()
    return f"its {event.label} is replaced" + (f" ({why})" if why else "")


def message(node: NodeView) -> str:
    losses = node.losses
    who = f"node {node.name!r}" + (f" of {node.layer} (deployed)" if node.layer else "")
    fixes = list(dict.fromkeys(event.fix() for event in losses))
    details = "; ".join(_detail(event) for event in losses)
    details = details[:1].upper() + details[1:]
    return (
        f"{'; '.join(_headline(event) for event in losses)}: {who} stays in the site but would be "
        f"{_consequence(losses)}. {details}: {'; '.join(fixes)}."
    )


class StayingNodeKept(Check):
    code = "PG001"
    name = "StayingNodeKept"
    why = (
        "a replaced apply resets (wipes) its node and a replaced or deleted VM takes the node's disk with it: a "
        "node that stays in the site keeps its VM and its apply, whatever their addresses, and is only ever "
        "updated in place."
    )

    def violations(self, plan: Plan, context: GuardContext) -> Iterator[str]:
        view = node_view(plan, context)
        for node in view.of(Fate.REPLACED, Fate.MACHINE_LOST):
            yield message(node)
        for event in view.unowned:  # a machine no node could be found for: a replacement is still refused
            if event.action == "replaced":
                yield (
                    f"{event.address} would be replaced: the {event.label} it manages would be destroyed and "
                    f"re-created, and no node of the site or of the state owns it. {event.fix()}."
                )
