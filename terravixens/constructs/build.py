"""Building resources with few round trips to cdktf's Node.js process: the conventions every construct follows.

Every call on a cdktf object (create, get, method) is a jsii round trip from Python to Node.js and back: a fraction
of a millisecond, paid per node when a construct makes it per node. A construct of terravixens therefore:

- creates each resource with all its arguments in the constructor call (one round trip), nested blocks included;
- reads a value that is the same for every node once, and keeps it (references render the same wherever they are
  used): `ClusterConfig.client_configuration()` and `ClusterConfig.machine_configuration(role)` do;
- names a binding's Terraform type with `resource_type(Binding)` and an address with `address(Binding, id)`, read
  once per process instead of once per resource (`resource.terraform_resource_type` is a round trip each time);
- writes a JSON null with `null()`, one token for the whole process, where a nested object needs every key;
- records where it sits with `locate(self, scope, id)` when the safety rules attribute blocks to it (TalosNode,
  ClusterConfig): the rules then know its construct path without asking cdktf for it.

Logical ids are still pinned one by one (`terravixens.logical_ids.pin`): they are public API. See
docs/adr/0027-synth-speed.md for what each round trip costs and where the time of a synth goes. A construct with an
instance per node can go further and hand its blocks over as JSON, its elements created on demand
(terravixens.constructs.python_blocks, docs/adr/0057-blocks-from-python.md): TalosNode does in the app's stacks.
"""

from __future__ import annotations

from functools import cache

from cdktf import IResolvable, Token
from constructs import IConstruct

_LOCATION = "_terravixens_location"


@cache
def resource_type(binding: type) -> str:
    """The Terraform type a generated binding class writes, e.g. "proxmox_virtual_environment_vm"."""
    # Every generated binding (and cdktf's DataResource) declares TF_RESOURCE_TYPE, a jsii class property; cdktf's
    # TerraformResource, the base they share, does not, so no class mypy can name here has it.
    resource_type_name: str = binding.TF_RESOURCE_TYPE  # type: ignore[attr-defined]
    return resource_type_name


@cache
def declared_type(cls: type) -> str | None:
    """The Terraform type a class declares (generated bindings, cdktf's DataResource), else None (a plain
    TerraformResource, whose type is per instance)."""
    try:
        declared: str = cls.TF_RESOURCE_TYPE  # type: ignore[attr-defined]  # see resource_type
        return declared
    except AttributeError:
        return None


def address(binding: type, logical_id: str) -> str:
    """The resource address Terraform knows it by (`replace_triggered_by`, `depends_on` overrides, messages)."""
    return f"{resource_type(binding)}.{logical_id}"


@cache
def null() -> IResolvable:
    """A token that renders as JSON null (cdktf's Token.null_value()), shared: it carries no state."""
    return Token.null_value()


def locate(construct: IConstruct, scope: IConstruct, id: str) -> None:
    """Remembers the scope and id a construct was created with (call it right after `super().__init__`)."""
    setattr(construct, _LOCATION, (scope, id))


def location_of(construct: IConstruct) -> tuple[IConstruct, str] | None:
    """(scope, id) recorded by `locate`, else None. A construct's path is its scope's path, "/" and its id (with
    "/" written "--", as the constructs library does); the root's path is empty."""
    return getattr(construct, _LOCATION, None)
