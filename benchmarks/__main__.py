"""`python -m benchmarks <command> [options]`: run a benchmark command from a checkout.

The commands are Django management commands (benchmarks/commands/), set up and run as
manage.py runs its own: the same settings, and the embedded Postgres started first
(config.database) unless DATABASE_URL names another server. They connect as the
schema's owner, as `manage.py migrate` does: a build vacuums what it wrote, which the
app's role may not (the servers a benchmark starts serve as the app's role). They are found here rather
than in an installed app, so the product neither installs nor imports them. Without a
command, or with `help`, this lists them; `<command> --help` gives a command's options.
"""

from __future__ import annotations

import os
import sys

from benchmarks.commands import command_load, command_names

PROG = "python -m benchmarks"


def usage() -> str:
    lines = [f"usage: {PROG} <command> [options]  ({PROG} <command> --help: its options)", "", "commands:"]
    names = command_names()
    width = max(map(len, names)) + 2
    for name in names:
        summary = command_load(name).help.split(". ")[0].split(": ")[0]
        lines.append(f"  {name:<{width}}{summary}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    from config.database import command_needs_database, ensure_database

    if command_needs_database(argv):  # as manage.py decides: the settings only say where it is
        ensure_database()
    django.setup()  # before a command module imports the models
    name = argv[1] if len(argv) > 1 else "help"
    if name in ("help", "-h", "--help"):
        sys.stdout.write(usage())
        return
    if name not in command_names():
        sys.stderr.write(f"Unknown command: {name!r}\n{usage()}")
        sys.exit(2)
    from config.database_roles import connected_as_owner

    with connected_as_owner():
        command_load(name).run_from_argv([PROG, name, *argv[2:]])


if __name__ == "__main__":
    main(sys.argv)
