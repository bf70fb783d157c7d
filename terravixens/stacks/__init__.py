"""One stack per layer, each with its own backend and state; every stack synthesizes from the site file alone."""

from terravixens.stacks.app import build_app, stack_names
from terravixens.stacks.base import BuildOptions, LayerStack
from terravixens.stacks.gitops import GitopsStack
from terravixens.stacks.hypervisors import HypervisorsStack
from terravixens.stacks.platform import PlatformStack
from terravixens.stacks.standalone import StandaloneStack

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
