"""Git repositories for tests: a work tree the test commits to, and a smart-HTTP server on
127.0.0.1 (`git http-backend` behind a token check) that serves its bare copy."""

from __future__ import annotations

import base64
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.local_http import base_url, http_served

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_AUTHOR_NAME": "Test", "GIT_AUTHOR_EMAIL": "test@example.com",
       "GIT_COMMITTER_NAME": "Test", "GIT_COMMITTER_EMAIL": "test@example.com", "LC_ALL": "C"}


def git(*args: str, cwd: Path, stdin: bytes | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=ENV, input=stdin, capture_output=True, check=True
                          ).stdout.decode().strip()


class Repository:
    """A work tree with a bare copy beside it (what servers serve), pushed after each commit."""

    def __init__(self, root: Path, name: str = "handbook") -> None:
        self.work = root / f"{name}-work"
        self.bare = root / f"{name}.git"
        self.work.mkdir(parents=True)
        git("init", "--quiet", "--initial-branch=main", cwd=self.work)
        git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=root)
        git("config", "uploadpack.allowAnySHA1InWant", "true", cwd=self.bare)
        git("config", "http.receivepack", "false", cwd=self.bare)

    def write(self, files: dict[str, str | bytes | None]) -> None:
        """Write (or, for None, delete) files of the work tree."""
        for path, content in files.items():
            target = self.work / path
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)

    def commit(self, files: dict[str, str | bytes | None], message: str = "change") -> str:
        """Commit these changes (all of the work tree), push them; the new commit id."""
        self.write(files)
        git("add", "--all", "--", ".", ":!vendor", cwd=self.work)  # a gitlink under vendor/ has no folder
        git("commit", "--quiet", "--allow-empty", "-m", message, cwd=self.work)
        git("push", "--quiet", str(self.bare), "main", cwd=self.work)
        return git("rev-parse", "HEAD", cwd=self.work)

    def commit_submodule_entry(self, path: str, commit: str = "1" * 40) -> str:
        """Commit a gitlink (what a submodule leaves in the tree) without cloning anything."""
        git("update-index", "--add", "--cacheinfo", f"160000,{commit},{path}", cwd=self.work)
        git("commit", "--quiet", "-m", f"submodule {path}", cwd=self.work)
        git("push", "--quiet", str(self.bare), "main", cwd=self.work)
        return self.head()

    def head(self) -> str:
        return git("rev-parse", "HEAD", cwd=self.work)


class _Backend(BaseHTTPRequestHandler):
    root: Path
    token: str
    requests: list[str]

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        self.requests.append(f"{self.command} {self.path} {self.headers.get('Authorization', '')}")
        expected = "Basic " + base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="git"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {**ENV, "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": path,
               "QUERY_STRING": query, "REQUEST_METHOD": self.command, "REMOTE_USER": "x-access-token",
               "REMOTE_ADDR": self.client_address[0], "CONTENT_TYPE": self.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": self.headers.get("Git-Protocol", "")}
        done = subprocess.run(["git", "http-backend"], env=env, input=body, capture_output=True, check=False)
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(": ")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def git_http_server(root: Path, token: str) -> Iterator[tuple[str, list[str]]]:
    """Serve the bare repositories under `root` over smart HTTP on 127.0.0.1, to requests
    carrying `token`; yields the base URL and the requests seen."""
    requests: list[str] = []
    handler = type("Backend", (_Backend,), {"root": root, "token": token, "requests": requests})
    with http_served(handler) as server:
        yield base_url(server), requests
