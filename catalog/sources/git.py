"""Git repository sources through the `git` command: a shallow mirror per source, the
commit a branch or tag names now, the files of a commit's tree, and their blobs.

What runs git here is a curator's URL, so every command runs with nothing of the
machine's own git set-up (no system or global config, no credential helper, no prompt),
only the transports named (https, http, ssh, and file for a repository under a source
root; never `ext::`), no redirects, and an http(s) host pinned to the address checked by
catalog.outbound (so a name cannot resolve to a private address between the check and
the fetch). A token travels as an Authorization header in git's environment (never on
its command line, where `ps` shows it), a deploy key as a 0600 file in a folder of its
own that is removed after the command; git's messages are scrubbed of both before they
are shown.

The mirror holds one commit at a time (fetched with --depth=1): disk stays bounded by
the size of one checkout's objects. What changed between two syncs is read from the
trees (a path whose blob id moved), so no history is needed.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, urlsplit

from django.conf import settings

from catalog.outbound.client import Destination, OutboundRefused, destination_check
from catalog.sources.errors import SourceError
from catalog.sources.globs import source_roots

_SHA = re.compile(r"^[0-9a-f]{40}$")
_SCP = re.compile(r"^(?P<user>[A-Za-z0-9._-]+@)?(?P<host>[A-Za-z0-9.-]+):(?P<path>[^/][^:]*)$")  # git@host:org/repo
# Forges whose file pages a chunk links to, by host: the page of a file at a commit (a
# chunk's line range is added as catalog.sources.locators.LINE_ANCHORS says).
FORGES = {
    "github": "{base}/blob/{commit}/{path}",
    "gitlab": "{base}/-/blob/{commit}/{path}",
    "gitea": "{base}/src/commit/{commit}/{path}",
}
KNOWN_HOSTS = {"github.com": "github", "gitlab.com": "gitlab", "codeberg.org": "gitea", "gitea.com": "gitea"}


# What the scheduled scan waits for one remote's answer (`git ls-remote`): it asks every
# git source in turn, so one that does not answer must not hold the others back.
SCAN_TIMEOUT = 60


class GitError(SourceError):
    """A git command failed or was refused; the message says why, without secrets."""


@dataclass(frozen=True)
class GitRemote:
    url: str
    ref: str = ""  # a branch, a tag or a commit id; "": the remote's default branch
    secret: str = ""  # an https token or an ssh private key, opened from its seal
    known_hosts: str = ""  # where the ssh host keys it showed are kept (known_hosts_path); "": a fetch's own

    @property
    def transport(self) -> str:
        return remote_transport(self.url)


@dataclass(frozen=True)
class TreeFile:
    path: str
    mode: str
    kind: str  # blob | commit (a submodule)
    sha: str
    size: int | None  # None for a submodule


def remote_transport(url: str) -> str:
    """https, http, ssh or file; GitError for anything else."""
    if url.startswith("-") or any(ch in url for ch in "\x00\n\r"):
        raise GitError("a repository URL may not start with '-' or hold control characters")
    if "::" in url.split("/", 1)[0]:
        raise GitError("remote helpers (`transport::address`) are not allowed; use https, ssh or a path")
    if _SCP.match(url):
        return "ssh"
    scheme = urlsplit(url).scheme
    if scheme in ("https", "http", "ssh"):
        return scheme
    if scheme == "file" or url.startswith("/"):
        return "file"
    raise GitError(f"{url!r} is not an https, http or ssh URL, git@host:path, or a path under a source root")


def remote_host(url: str) -> tuple[str, int]:
    """The host and port an https, http or ssh remote connects to. Refused: a host not
    written in ASCII (its IDNA spelling differs between Python and git's libcurl, so the
    address checked would not be the one reached: write its xn-- form), and a user name
    or password in an http(s) URL (a token there would be shown and logged)."""
    scp = _SCP.match(url)
    if scp:
        host, port = scp.group("host"), 22
    else:
        parts = urlsplit(url)
        try:
            port = parts.port or {"https": 443, "http": 80, "ssh": 22}[parts.scheme]
        except ValueError as exc:
            raise GitError(f"{url!r} is not a usable URL: {exc}") from None
        host = parts.hostname or ""
        if parts.scheme in ("https", "http") and (parts.username or parts.password):
            raise GitError("put the token in the credential field, not in the URL (a URL is shown and logged)")
        if parts.password:
            raise GitError("an ssh URL may name a user, not a password: give a deploy key in the credential field")
    if not host:
        raise GitError(f"{url!r} names no host")
    if not host.isascii():
        raise GitError(f"write the host {host!r} in its ASCII form (xn--...): names are checked as written")
    return host, port


def remote_address(url: str) -> Destination:
    """The address the remote's host resolves to, checked as every outbound request is
    (catalog.outbound: no loopback, private or link-local address unless
    LECTERN_OUTBOUND_ALLOWED_NETWORKS allows it); git is then made to connect there."""
    host, port = remote_host(url)
    try:
        # The outbound check takes an http(s) URL: the host and port are what it checks.
        return destination_check(f"https://{f'[{host}]' if ':' in host else host}:{port}/")
    except OutboundRefused as exc:
        raise GitError(str(exc)) from None
    except OSError as exc:
        raise GitError(f"{host} does not resolve: {exc.strerror or exc}") from None


def secret_problem(url: str, secret: str) -> str | None:
    """Why `secret` may not be sent to `url`, or None: a deploy key goes over ssh only and
    a token over https only (over http it would travel in clear: allowed to a loopback
    address alone, as a test's server is)."""
    if not secret:
        return None
    transport = remote_transport(url)
    pem = secret.lstrip().startswith("-----BEGIN")
    if transport == "ssh":
        return None if pem else "an ssh remote takes a deploy key (a private key beginning '-----BEGIN'), not a token"
    if pem:
        return "a private key goes to an ssh remote only; an https remote takes a token"
    if transport == "file":
        return "a repository under a source root needs no token or key"
    if transport == "http" and not remote_address(url).address.is_loopback:
        return "a token over http would travel in clear: use the repository's https URL"
    return None


def remote_problem(url: str) -> str | None:
    """Why `url` cannot be a git source's remote, or None: the same rules a fetch applies,
    checked when a curator saves it (a host that does not resolve now is no refusal)."""
    try:
        transport = remote_transport(url)
        if transport == "file":
            _local_repository(url)
        else:
            try:
                remote_address(url)
            except GitError as exc:
                if "does not resolve" not in str(exc):
                    raise
    except GitError as exc:
        return str(exc)
    return None


def _local_repository(url: str) -> Path:
    path = Path(urlsplit(url).path if url.startswith("file:") else url)
    resolved = path.resolve()
    if not any(resolved.is_relative_to(root) for root in source_roots()):
        raise GitError(f"{url!r} is outside the configured source roots (LECTERN_SOURCE_ROOTS)")
    return resolved


def web_link(url: str, commit: str, path: str) -> tuple[str, str] | None:
    """The forge page of `path` at `commit` and the forge's kind, where the host is a
    forge Lectern knows (KNOWN_HOSTS, and LECTERN_GIT_WEB_HOSTS for self-hosted ones),
    else None."""
    scp = _SCP.match(url)
    host, repo = (scp.group("host"), scp.group("path")) if scp else (urlsplit(url).hostname or "",
                                                                      urlsplit(url).path.lstrip("/"))
    forge = {**KNOWN_HOSTS, **forge_hosts()}.get(host.lower())
    if forge is None or not repo.strip("/"):
        return None
    base = f"https://{host}/{repo.strip('/').removesuffix('.git')}"
    return FORGES[forge].format(base=base, commit=commit, path=quote(path)), forge


def forge_hosts() -> dict[str, str]:
    """LECTERN_GIT_WEB_HOSTS: `host=github|gitlab|gitea` pairs."""
    hosts = {}
    for pair in settings.LECTERN_GIT_WEB_HOSTS:
        host, _, forge = pair.partition("=")
        if forge.strip() in FORGES:
            hosts[host.strip().lower()] = forge.strip()
    return hosts


# --- running git ------------------------------------------------------------------------


@contextmanager
def _environment(remote: GitRemote) -> Iterator[tuple[dict[str, str], str]]:
    """git's environment for `remote`, and the URL to give it: no config but what is set
    here, the transport allowed, the secret placed; the key folder removed after."""
    transport = remote.transport
    folder = Path(tempfile.mkdtemp(prefix="lectern-git-"))
    try:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false",
               "SSH_ASKPASS": "/bin/false", "GIT_ALLOW_PROTOCOL": "file" if transport == "file" else transport,
               "LC_ALL": "C"}
        config = [("http.followRedirects", "false"), ("http.lowSpeedLimit", "1000"), ("http.lowSpeedTime", "60"),
                  ("core.askPass", "/bin/false"), ("credential.helper", "")]
        url = remote.url
        if remote.secret and (problem := secret_problem(url, remote.secret)):
            raise GitError(problem)
        if transport in ("https", "http"):
            destination = remote_address(url)
            config.append(("http.curloptResolve", f"{destination.host}:{destination.port}:{destination.address}"))
            if remote.secret:
                user = urlsplit(url).username or "x-access-token"
                basic = base64.b64encode(f"{user}:{remote.secret}".encode()).decode()
                config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        elif transport == "ssh":
            # Connected to the address checked (HostName), the host key known by the name
            # written (HostKeyAlias), never waiting long for a host that does not answer.
            destination = remote_address(url)
            ssh = ["ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=accept-new",
                   "-o", f"UserKnownHostsFile={_known_hosts(remote, folder)}", "-o", f"HostName={destination.address}",
                   "-o", f"HostKeyAlias={destination.host}", "-o", "ConnectTimeout=20"]
            if remote.secret:
                key = folder / "key"
                key.touch(mode=0o600)
                key.write_text(remote.secret.strip() + "\n")
                ssh += ["-i", str(key), "-o", "IdentitiesOnly=yes"]
            env["GIT_SSH_COMMAND"] = " ".join(ssh)
        else:
            url = _local_repository(url).as_uri()  # file://: --depth applies, as it does not to a bare path
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for i, (key_name, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key_name, value
        yield env, url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _known_hosts(remote: GitRemote, folder: Path) -> Path:
    if not remote.known_hosts:
        return folder / "known_hosts"
    path = Path(remote.known_hosts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _run(args: list[str], *, env: dict[str, str], remote: GitRemote | None = None, cwd: Path | None = None,
         stdin: bytes | None = None, timeout: float | None = None) -> bytes:
    """git `args`, its output; GitError saying why when it fails or outlasts `timeout`
    (LECTERN_GIT_TIMEOUT by default). git runs in a process group of its own, so a
    timeout stops what it started too (ssh, git-remote-https), not git alone."""
    limit = timeout or settings.LECTERN_GIT_TIMEOUT
    process = subprocess.Popen(["git", *args], cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(stdin, timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise GitError(f"git {_command(args)} took longer than {limit:.0f} s (LECTERN_GIT_TIMEOUT)") from None
    if process.returncode != 0:
        message = _scrubbed(err, remote)
        if any(sign in message for sign in _REFUSED_CREDENTIALS):
            raise GitError(f"the remote refused the credentials (git {_command(args)}): check the source's token "
                           f"or deploy key; git said: {message}")
        raise GitError(f"git {_command(args)} failed: {message}")
    return out


def _command(args: list[str]) -> str:
    return next(arg for arg in args[2 if args[0] == "-C" else 0:] if not arg.startswith("-"))


# What git says when the remote wants credentials it was not given or refused those it was.
_REFUSED_CREDENTIALS = ("could not read Username", "Authentication failed", "Permission denied (publickey",
                        "The requested URL returned error: 401", "The requested URL returned error: 403")


def _scrubbed(stderr: bytes, remote: GitRemote | None) -> str:
    """git's complaint, one line, with nothing of the secret in it."""
    text = " ".join(stderr.decode("utf-8", "replace").split())
    if remote is not None and remote.secret:
        for line in remote.secret.splitlines():
            if len(line.strip()) >= 4:
                text = text.replace(line.strip(), "[secret]")
    return text[-500:] or "no message"


def _bare_env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull, "HOME": os.devnull, "LC_ALL": "C"}


def remote_commit(remote: GitRemote) -> str:
    """The commit the remote's branch or tag names now (a commit id is itself), read
    without fetching: what the scheduled scan compares with the last sync."""
    if _SHA.match(remote.ref):
        return remote.ref
    with _environment(remote) as (env, url):
        out = _run(["ls-remote", "--end-of-options", url, remote.ref or "HEAD"], env=env, remote=remote,
                   timeout=min(SCAN_TIMEOUT, settings.LECTERN_GIT_TIMEOUT))
    refs: dict[str, str] = {}
    for line in out.decode().splitlines():
        commit, _, name = line.partition("\t")
        refs[name] = commit
    for name in (remote.ref or "HEAD", f"refs/heads/{remote.ref}", f"refs/tags/{remote.ref}^{{}}",
                 f"refs/tags/{remote.ref}"):
        if name in refs:
            return refs[name]
    raise GitError(f"the remote has no branch or tag {remote.ref!r}")


def mirror_path(source_id: int) -> Path:
    return Path(settings.LECTERN_GIT_DIR) / f"source-{source_id}.git"


def known_hosts_path(source_id: int) -> Path:
    """The ssh host keys a source's remote showed: trusted on its first fetch, and a
    later fetch to a host showing another key is refused (kept beside the mirror, not
    in it: a failed fetch removes the mirror, not what was trusted)."""
    return Path(settings.LECTERN_GIT_DIR) / f"source-{source_id}.known_hosts"


def mirror_remove(source_id: int) -> None:
    """Remove a deleted source's mirror and trusted host keys (caches: nothing else reads them)."""
    shutil.rmtree(mirror_path(source_id), ignore_errors=True)
    known_hosts_path(source_id).unlink(missing_ok=True)


def mirror_fetch(source_id: int, remote: GitRemote) -> str:
    """Fetch the remote's ref (one commit deep) into the source's mirror; its commit id.
    The mirror keeps only that commit: what an earlier sync fetched is pruned."""
    mirror = mirror_path(source_id)
    if not (mirror / "HEAD").exists():
        mirror.mkdir(parents=True, exist_ok=True)
        _run(["init", "--quiet", "--bare", str(mirror)], env=_bare_env())
    with _environment(remote) as (env, url):
        try:
            _run(["-C", str(mirror), "fetch", "--quiet", "--depth=1", "--no-tags", "--no-write-fetch-head",
                  "--end-of-options", url, f"+{remote.ref or 'HEAD'}:refs/lectern/synced"], env=env, remote=remote)
        except GitError:
            # A fetch stopped midway may leave its locks (shallow.lock) behind, which
            # would refuse every later fetch: the mirror is a cache, so it goes whole.
            shutil.rmtree(mirror, ignore_errors=True)
            raise
    commit = _run(["-C", str(mirror), "rev-parse", "--verify", "refs/lectern/synced^{commit}"],
                  env=_bare_env()).decode().strip()
    _run(["-C", str(mirror), "gc", "--auto", "--quiet"], env=_bare_env())
    return commit


def tree_files(source_id: int, commit: str) -> list[TreeFile]:
    """Every file of the commit's tree (recursively), with its blob id and size."""
    out = _run(["-C", str(mirror_path(source_id)), "ls-tree", "-r", "-z", "--long", "--full-tree", commit],
               env=_bare_env())
    files = []
    for entry in out.split(b"\0"):
        if not entry:
            continue
        meta, _, path = entry.partition(b"\t")
        mode, kind, sha, size = meta.decode().split(maxsplit=3)
        files.append(TreeFile(path.decode("utf-8", "surrogateescape"), mode, kind, sha,
                              None if size.strip() == "-" else int(size)))
    return files


# The most blob bytes one `git cat-file --batch` reads into memory: a first sync of a
# repository of large files reads them in batches, not all at once.
BLOB_BATCH_BYTES = 64 * 1024 * 1024


def blobs_read(source_id: int, files: list[TreeFile]) -> Iterator[tuple[TreeFile, bytes]]:
    """Each file with its blob's bytes, read by `git cat-file --batch` in batches of at
    most BLOB_BATCH_BYTES (a file larger than that alone in its batch)."""
    batch: list[TreeFile] = []
    size = 0
    for entry in files:
        if batch and size + (entry.size or 0) > BLOB_BATCH_BYTES:
            yield from _batch_read(source_id, batch)
            batch, size = [], 0
        batch.append(entry)
        size += entry.size or 0
    if batch:
        yield from _batch_read(source_id, batch)


def _batch_read(source_id: int, files: list[TreeFile]) -> Iterator[tuple[TreeFile, bytes]]:
    out = _run(["-C", str(mirror_path(source_id)), "cat-file", "--batch"], env=_bare_env(),
               stdin="".join(f"{entry.sha}\n" for entry in files).encode())
    at = 0
    for entry in files:
        header_end = out.index(b"\n", at)
        _, kind, size = out[at:header_end].decode().split()
        if kind != "blob":
            raise GitError(f"{entry.path} ({entry.sha}) is a {kind}, not a file")
        start = header_end + 1
        yield entry, out[start:start + int(size)]
        at = start + int(size) + 1
