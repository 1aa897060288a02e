"""Glob sources' files, confined to the source roots (LECTERN_SOURCE_ROOTS): resolving a
pattern ('..' and absolute paths outside the roots refused, symlinks escaping a root
skipped), listing what agents may read, and reading one file as it was indexed."""

from __future__ import annotations

import glob
import os
import stat
from pathlib import Path, PurePosixPath

from django.conf import settings

from catalog.sources.errors import SourceError
from catalog.sources.fingerprints import fingerprint


def source_roots() -> list[Path]:
    return [Path(root).resolve() for root in settings.LECTERN_SOURCE_ROOTS]


def root_and_pattern(pattern: str) -> tuple[Path, str]:
    """The source root a glob reads from and the pattern relative to it.

    Refuses `..` anywhere, NUL characters (no file name holds one: the OS would refuse
    the path) and absolute patterns outside every configured root.
    """
    roots = source_roots()
    if not pattern.strip():
        raise SourceError("empty glob pattern")
    if "\x00" in pattern:
        raise SourceError(f"glob {pattern!r} may not contain NUL characters")
    if ".." in PurePosixPath(pattern).parts:
        raise SourceError(f"glob {pattern!r} may not contain '..'")
    if not os.path.isabs(pattern):
        if not roots:
            raise SourceError("no source roots are configured (LECTERN_SOURCE_ROOTS)")
        return roots[0], pattern
    for root in roots:
        try:
            return root, str(PurePosixPath(pattern).relative_to(root))
        except ValueError:
            continue
    raise SourceError(f"glob {pattern!r} is outside the configured source roots")


def glob_entries(pattern: str) -> tuple[list[tuple[str, Path, os.stat_result]], list[tuple[str, str]]]:
    """([(relative path, real path, stat)], [(relative path, reason skipped)]).

    Real paths are found by resolving each distinct parent directory once and only
    symlinked files themselves: a scan of 10,000 files costs one lstat each, not a
    full path resolution each.
    """
    root, relative = root_and_pattern(pattern)
    parents: dict[str, Path] = {}
    files, skipped = [], []
    for match in sorted(glob.glob(relative, root_dir=root, recursive=True)):
        folder, name = os.path.split(match)
        if folder not in parents:
            parents[folder] = (root / folder).resolve()
        real = parents[folder] / name
        try:
            info = os.lstat(real)
            if stat.S_ISLNK(info.st_mode):
                real = real.resolve()
                info = real.stat()
        except OSError:
            skipped.append((match, "unreadable or a dangling symlink"))
            continue
        if not real.is_relative_to(root):
            skipped.append((match, "symlink points outside the source root"))
        elif stat.S_ISREG(info.st_mode):
            files.append((match, real, info))
    return files, skipped


def glob_resolve(pattern: str) -> tuple[list[tuple[str, Path]], list[tuple[str, str]]]:
    """([(relative path, real path)], [(relative path, reason skipped)]) for a glob."""
    files, skipped = glob_entries(pattern)
    return [(relative, real) for relative, real, _ in files], skipped


class SourceChanged(SourceError):
    """A glob source's files are no longer the ones it was indexed (and approved) from."""


def glob_listing(pattern: str, *, max_bytes: int) -> list[str]:
    """The relative paths glob_file_read serves for `pattern`: its files inside the
    source root (glob_resolve's rules) of at most `max_bytes`."""
    files, _ = glob_entries(pattern)
    return [relative for relative, _, info in files if info.st_size <= max_bytes]


def glob_file_read(*, pattern: str, path: str, fingerprint_indexed: str, max_bytes: int | None) -> bytes | None:
    """The bytes of `path` when glob_listing(pattern) lists it (any size with `max_bytes`
    None: an indexed document), else None.

    Paths are looked up among the files the glob resolves, never joined to a root, so
    the root confinement is glob_resolve's alone. A file is served only while the
    source's files are the ones `fingerprint_indexed` was computed from (what was
    indexed, and what an approval is bound to), else SourceChanged; the file opened must
    be the one listed (same inode, size and mtime, not a symlink swapped in since).
    """
    files, _ = glob_entries(pattern)
    found = next(((real, info) for relative, real, info in files if relative == path), None)
    if found is None or (max_bytes is not None and found[1].st_size > max_bytes):
        return None
    if fingerprint((relative, info.st_size, info.st_mtime) for relative, _, info in files) != fingerprint_indexed:
        raise SourceChanged(f"the files of {pattern!r} changed since they were indexed")
    real, listed = found
    try:
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise SourceChanged(f"{path!r} cannot be opened as listed: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if (opened.st_ino, opened.st_size, opened.st_mtime_ns) != (listed.st_ino, listed.st_size, listed.st_mtime_ns):
            raise SourceChanged(f"{path!r} changed while it was being read")
        return handle.read()
