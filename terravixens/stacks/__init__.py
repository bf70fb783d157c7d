"""One stack per layer, each with its own backend and state; every stack synthesizes from the site file alone.

A layer kind's stack class is imported when it is first used (terravixens.layers resolves it for build_app): a site
without standalone nodes never imports the standalone constructs and their bindings.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from terravixens.stacks.app import build_app, stack_names
from terravixens.stacks.base import BuildOptions, LayerStack

if TYPE_CHECKING:
    from terravixens.stacks.gitops import GitopsStack
    from terravixens.stacks.hypervisors import HypervisorsStack
    from terravixens.stacks.platform import PlatformStack
    from terravixens.stacks.standalone import StandaloneStack

_STACK_CLASSES = {
    "GitopsStack": "terravixens.stacks.gitops",
    "HypervisorsStack": "terravixens.stacks.hypervisors",
    "PlatformStack": "terravixens.stacks.platform",
    "StandaloneStack": "terravixens.stacks.standalone",
}


def __getattr__(name: str) -> type:
    if name in _STACK_CLASSES:
        stack_class: type = getattr(importlib.import_module(_STACK_CLASSES[name]), name)
        return stack_class
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "BuildOptions",
    "GitopsStack",
    "HypervisorsStack",
    "LayerStack",
    "PlatformStack",
    "StandaloneStack",
    "build_app",
    "stack_names",
]
