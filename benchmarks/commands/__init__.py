"""The benchmark commands: Django management commands that no installed app carries,
one module per command as in an app's management/commands, run by
`python -m benchmarks <command>` (or `call_command(command_load(name), ...)`)."""

from __future__ import annotations

import pkgutil
from importlib import import_module

from django.core.management.base import BaseCommand


def command_names() -> list[str]:
    return sorted(module.name for module in pkgutil.iter_modules(__path__))


def command_load(name: str) -> BaseCommand:
    command: BaseCommand = import_module(f"{__name__}.{name}").Command()
    return command
