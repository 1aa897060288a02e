#!/usr/bin/env python
"""Django's command-line utility for Lectern."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from config.database import command_needs_database, ensure_database

    if command_needs_database(sys.argv):
        ensure_database()  # settings only say where the database is; this starts it
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
