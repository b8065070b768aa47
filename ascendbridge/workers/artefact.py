"""An attempt's adaptation directory as a packed artefact: how it travels to a Ray node and back.

Hosts of a Ray cluster share no file system, so the head packs the attempt's staging copy, the
node unpacks it into its own scratch folder, runs the stage there and packs the result; the head
checks the sha256 before the content replaces its staging copy (which the gate-passed promotion
then swaps in, as with the local executor). The `.venv` never travels: it is a build output with
absolute paths inside, and uv rebuilds it from the package's lock on each host.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ab_runtime.fileops import sha256_file
from ascendbridge.workers.attempt_dir import LINKED


class ArtefactError(Exception):
    """A packed directory that cannot be used (checksum mismatch, unreadable archive)."""


@dataclass(frozen=True)
class Artefact:
    data: bytes  # a gzipped tar of the directory's content, `.venv` left out
    sha256: str  # of `data`, computed by the sender


def pack(folder: Path) -> Artefact:
    """The content of `folder` (without its top-level `.venv`) as one checksummed archive."""
    with tempfile.TemporaryDirectory(prefix="ab-pack-") as tmp:
        archive = Path(tmp) / "dir.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            for child in sorted(folder.iterdir()) if folder.is_dir() else []:
                if child.name != LINKED:
                    tar.add(child, arcname=child.name)
        return Artefact(archive.read_bytes(), sha256_file(archive))


def unpack(artefact: Artefact, target: Path) -> None:
    """Make `target`'s content (its `.venv` kept) the artefact's, after checking the checksum.
    Raises ArtefactError and leaves `target` untouched when the archive is not the one sent."""
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".ab-unpack-", dir=target.parent) as tmp:
        archive = Path(tmp) / "dir.tar.gz"
        archive.write_bytes(artefact.data)
        actual = sha256_file(archive)
        if actual != artefact.sha256:
            raise ArtefactError(
                f"packed directory for {target.name}: sha256 {actual[:12]}… is not the "
                f"{artefact.sha256[:12]}… that was sent"
            )
        incoming = Path(tmp) / "content"
        try:
            with tarfile.open(archive, "r:gz") as tar:
                tar.extractall(incoming, filter="tar")
        except (tarfile.TarError, OSError) as exc:
            raise ArtefactError(f"packed directory for {target.name} cannot be unpacked: {exc}") from None
        for child in list(target.iterdir()):
            if child.name == LINKED:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        for child in sorted(incoming.iterdir()) if incoming.is_dir() else []:
            os.rename(child, target / child.name)
