"""A site's package index for tests: tiny real wheels, a PEP 503 tree, and a real HTTP server on
127.0.0.1 (optionally behind Basic auth, as a company mirror is) in its own process."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

USER = "builder"
PASSWORD = "s3cr@t!"  # `@` must be sent as %40 in the URL: the case a pip.conf reader used to trip on
QUOTED_PASSWORD = "s3cr%40t!"

SERVER = r"""
import base64, functools, http.server, sys
want = sys.argv[3]
class Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if want and self.headers.get("Authorization") != "Basic " + want:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="mirror"')
            self.end_headers()
            return
        super().do_GET()
    do_HEAD = do_GET
    def log_message(self, fmt, *args):
        sys.stderr.write("%s\n" % self.path)
        sys.stderr.flush()
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=sys.argv[1]))
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def build_wheel(out: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> Path:
    """A pure-Python wheel with one module and a correct RECORD."""
    module = name.replace("-", "_")
    dist = f"{module}-{version}"
    files = {
        f"{module}/__init__.py": f"VERSION = {version!r}\n",
        f"{dist}.dist-info/METADATA": "Metadata-Version: 2.1\n"
        f"Name: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires),
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        writer.writerow([path, f"sha256={digest}", len(text.encode())])
    writer.writerow([f"{dist}.dist-info/RECORD", "", ""])
    wheel = out / f"{dist}-py3-none-any.whl"
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
        archive.writestr(f"{dist}.dist-info/RECORD", record.getvalue())
    return wheel


def index_tree(root: Path, wheels: list[Path]) -> Path:
    """`root/simple/<project>/` holding each wheel and its PEP 503 page (sha256 fragments)."""
    for wheel in wheels:
        project = root / "simple" / wheel.name.split("-")[0].replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        (project / wheel.name).write_bytes(wheel.read_bytes())
    for project in (root / "simple").iterdir():
        links = "".join(
            f'<a href="{w.name}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}">{w.name}</a>\n'
            for w in sorted(project.glob("*.whl"))
        )
        (project / "index.html").write_text(f"<html><body>\n{links}</body></html>\n")
    return root


@contextmanager
def serve(directory: Path, auth: bool) -> Iterator[tuple[int, Path]]:
    """Serve `directory` on 127.0.0.1 (a free port); yields (port, file the requested paths go to)."""
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode() if auth else ""
    requests = directory.parent / f"requests-{directory.name}.log"
    with open(requests, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(directory), "", token], stdout=subprocess.PIPE, stderr=log, text=True
        )
        try:
            assert proc.stdout is not None
            yield int(proc.stdout.readline()), requests
        finally:
            proc.terminate()
            proc.wait(timeout=10)


PYPROJECT = """[project]
name = "site-sync-probe"
version = "0.1.0"
requires-python = ">=3.10"
dependencies = ["abhost-base"]

[project.optional-dependencies]
cpu = ["abhost-cpu"]
cuda = []
ascend = []

[tool.uv]
package = false
conflicts = [[{ extra = "cpu" }, { extra = "cuda" }, { extra = "ascend" }]]
"""


def probe_wheels(out: Path) -> list[Path]:
    return [build_wheel(out, "abhost-base", "1.0"), build_wheel(out, "abhost-cpu", "1.0", ("abhost-base>=1.0",))]
