"""Pinned sources of the real datasets and an explicit, checksummed download (docs/FACTER.md §1.1).

Layout under the data directory (``$FACTERLAB_DATA``, default ``~/.cache/facterlab/data``)::

    ml-1m/ratings.dat users.dat movies.dat
    ml-100k/u.data u.user u.item (u.genre, u.occupation optional)
    amazon-movies-tv/Movies_and_TV_5.json.gz meta_Movies_and_TV.json.gz

Checksums: GroupLens publishes an MD5 for each zip (``<zip>.md5`` next to it); the SHA-256 sums are the
ones reproduced by many independent projects (for ML-100K it is consistent with the SHA-256 of the
``u.data`` member we hold).  The Amazon 2018 files have no published checksum: they are ``None`` and a
download says "unverified", then records the SHA-256 of what it got in ``<dir>/.facterlab-sha256.json``
so that later checks see a truncated or replaced file.  Offline, a missing file raises
:class:`FileNotFoundError` naming the file, the directory to put it in and the URL; a download that
cannot reach the server is a one-line :class:`DownloadError` saying what to do instead; nothing ever
falls back to other data.

:func:`file_integrity` compares the files in place with the pinned (or recorded) SHA-256 sums;
``facterlab data summary`` prints a warning for each file that differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from facterlab.config import data_dir as _data_dir
from facterlab.filehash import file_sha256 as _memo_sha256  # remembered by path, size, mtime
from facterlab.safeio import read_json


@dataclass(frozen=True)
class Download:
    """One downloadable file: URL, checksums (None when unknown) and, for zips, the members to extract."""

    url: str
    filename: str
    sha256: str | None = None
    md5: str | None = None
    members: tuple = ()  # zip member paths, extracted flat into the dataset directory


@dataclass(frozen=True)
class Source:
    """A dataset: its sub-directory of the data dir, the files the loader needs, and their downloads."""

    name: str
    label: str
    subdir: str
    files: tuple
    downloads: tuple
    homepage: str


SOURCES = {
    "ml-1m": Source(
        name="ml-1m",
        label="MovieLens-1M",
        subdir="ml-1m",
        files=("ratings.dat", "users.dat", "movies.dat"),
        downloads=(
            Download(
                url="https://files.grouplens.org/datasets/movielens/ml-1m.zip",
                filename="ml-1m.zip",
                sha256="a6898adb50b9ca05aa231689da44c217cb524e7ebd39d264c56e2832f2c54e20",
                md5="c4d9eecfca2ab87c1945afe126590906",
                members=("ml-1m/ratings.dat", "ml-1m/users.dat", "ml-1m/movies.dat", "ml-1m/README"),
            ),
        ),
        homepage="https://grouplens.org/datasets/movielens/1m/",
    ),
    "ml-100k": Source(
        name="ml-100k",
        label="MovieLens-100K",
        subdir="ml-100k",
        files=("u.data", "u.user", "u.item"),
        downloads=(
            Download(
                url="https://files.grouplens.org/datasets/movielens/ml-100k.zip",
                filename="ml-100k.zip",
                sha256="50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229",
                md5="0e33842e24a9c977be4e0107933c0723",
                members=(
                    "ml-100k/u.data",
                    "ml-100k/u.user",
                    "ml-100k/u.item",
                    "ml-100k/u.genre",
                    "ml-100k/u.occupation",
                    "ml-100k/README",
                ),
            ),
        ),
        homepage="https://grouplens.org/datasets/movielens/100k/",
    ),
    "amazon": Source(
        name="amazon",
        label="Amazon Movies & TV 2018 (5-core)",
        subdir="amazon-movies-tv",
        files=("Movies_and_TV_5.json.gz", "meta_Movies_and_TV.json.gz"),
        downloads=(
            Download(
                url="https://datarepo.eng.ucsd.edu/mcauley_group/data/amazon_v2/categoryFilesSmall/"
                "Movies_and_TV_5.json.gz",
                filename="Movies_and_TV_5.json.gz",
            ),
            Download(
                url="https://datarepo.eng.ucsd.edu/mcauley_group/data/amazon_v2/metaFiles2/meta_Movies_and_TV.json.gz",
                filename="meta_Movies_and_TV.json.gz",
            ),
        ),
        homepage="https://cseweb.ucsd.edu/~jmcauley/datasets/amazon_v2/",
    ),
}

# SHA-256 of the extracted ML-100K members (computed from a copy of the GroupLens archive's files;
# u.data agrees with independent published records).  Checked by `facterlab data summary`
# (file_integrity), which warns when a file differs from the original.
KNOWN_FILE_SHA256 = {
    ("ml-100k", "u.data"): "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490",
    ("ml-100k", "u.user"): "f120e114da2e8cf314fd28f99417c94ae9ddf1cb6db8ce0e4b5995d40e90e62c",
    ("ml-100k", "u.item"): "553841ebc7de3a0fd0d6b62a204ea30c1e651aacfb2814c7a6584ac52f2c5701",
}


RECORDED_SUMS = ".facterlab-sha256.json"  # SHA-256 of downloaded files that have no pinned checksum


class DownloadError(ValueError):
    """A download that could not be made (no network, server error): one line, with what to do."""


def _recorded_sums(directory: Path) -> dict:
    try:
        data = read_json(directory / RECORDED_SUMS, what="recorded checksums")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _record_sum(directory: Path, filename: str, digest: str) -> None:
    sums = _recorded_sums(directory)
    sums[filename] = digest
    tmp = directory / f".{RECORDED_SUMS}.tmp"
    tmp.write_text(json.dumps(sums, indent=2, sort_keys=True))
    os.replace(tmp, directory / RECORDED_SUMS)


def file_integrity(name: str, data_dir: os.PathLike | str | None = None) -> list:
    """For each file the loader of ``name`` reads: ``{"file", "status", "sha256"}`` with status
    ``"original"`` (matches the pinned SHA-256), ``"differs"`` (does not: a truncated, edited or re-saved
    file), ``"as downloaded"`` / ``"changed since download"`` (against the sum recorded at download for
    files without a published checksum), ``"unverified"`` (no sum known) or ``"missing"``."""
    src = source(name)
    directory = _data_dir(data_dir) / src.subdir
    recorded = _recorded_sums(directory)
    out = []
    for f in src.files:
        p = directory / f
        if not p.is_file():
            out.append({"file": f, "status": "missing", "sha256": None})
            continue
        digest = _memo_sha256(p)
        pinned = KNOWN_FILE_SHA256.get((name, f))
        if pinned:
            status = "original" if digest == pinned else "differs"
        elif f in recorded:
            status = "as downloaded" if digest == recorded[f] else "changed since download"
        else:
            status = "unverified"
        out.append({"file": f, "status": status, "sha256": digest, "expected": pinned or recorded.get(f)})
    return out


def integrity_warnings(name: str, data_dir: os.PathLike | str | None = None) -> list:
    """One sentence per file of ``name`` that differs from its pinned or recorded SHA-256."""
    directory = _data_dir(data_dir) / source(name).subdir
    return [
        f"{directory / r['file']}: SHA-256 {r['sha256'][:16]}... differs from the "
        f"{'pinned original' if r['status'] == 'differs' else 'one recorded at download'} "
        f"({str(r['expected'])[:16]}...): a truncated, edited or re-saved file; results will not match "
        f"published ones (restore it or run `facterlab data download --dataset {name}`)"
        for r in file_integrity(name, data_dir)
        if r["status"] in ("differs", "changed since download")
    ]


def source(name: str) -> Source:
    """The :class:`Source` of a real dataset; ValueError for synthetic/auto/unknown names."""
    if name not in SOURCES:
        raise ValueError(f"no download source for dataset {name!r}; real datasets: {', '.join(SOURCES)}")
    return SOURCES[name]


def missing_files(name: str, data_dir: os.PathLike | str | None = None) -> list:
    """Files the loader of ``name`` needs that are not in ``<data_dir>/<subdir>/``."""
    src = source(name)
    directory = _data_dir(data_dir) / src.subdir
    return [f for f in src.files if not (directory / f).is_file()]


def missing_message(name: str, data_dir: os.PathLike | str | None = None) -> str:
    """The sentence a missing-file error carries: which file(s), where to put them, where they come from."""
    src = source(name)
    directory = _data_dir(data_dir) / src.subdir
    missing = missing_files(name, data_dir) or list(src.files)
    broken = [f for f in missing if (directory / f).is_symlink()]
    if broken:  # there, but a link that resolves to nothing: say so, not "missing"
        f = broken[0]
        try:
            (directory / f).resolve(strict=True)
            why = "does not resolve to a file"
        except RuntimeError:
            why = "is a symbolic link loop"
        except OSError:
            why = f"is a symbolic link to {os.readlink(directory / f)!r}, which does not exist"
        return f"{src.label}: {directory / f} {why}; replace it with the file itself or a working link"
    origin = "; ".join(
        f"{d.url} (" + (f"SHA-256 {d.sha256}" if d.sha256 else "no published checksum: unverified") + ")"
        for d in src.downloads
    )
    how = ("unzip it and put " if src.downloads[0].members else "put ") + ", ".join(src.files)
    return (
        f"{src.label}: missing file(s) {', '.join(missing)} in {directory}. "
        f"Get them from {origin}; {how} into {directory}/ "
        f"(or run `facterlab data download --dataset {name}`; the data dir is set by FACTERLAB_DATA)."
    )


def file_sha256(path: os.PathLike | str, chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of a file, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def _file_md5(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.md5()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: os.PathLike | str, dl: Download) -> str:
    """Check a downloaded file against its pinned SHA-256 (else MD5); return "verified" or "unverified".

    A mismatch is a ValueError naming the file and both sums.
    """
    path = Path(path)
    if dl.sha256:
        got = file_sha256(path)
        if got != dl.sha256:
            raise ValueError(f"checksum mismatch for {path.name} from {dl.url}: SHA-256 {got}, expected {dl.sha256}")
        return "verified"
    if dl.md5:
        got = _file_md5(path)
        if got != dl.md5:
            raise ValueError(f"checksum mismatch for {path.name} from {dl.url}: MD5 {got}, expected {dl.md5}")
        return "verified"
    return "unverified"


def unreachable(url: str, timeout: float = 5.0) -> str | None:
    """``None`` when ``url``'s server answers a HEAD request within ``timeout`` seconds (through any
    proxy the environment sets), else the reason in a few words: a quick check before a download,
    so that an offline machine (no DNS, a firewall that drops packets) fails in seconds.

    >>> unreachable("http://127.0.0.1:9/none", timeout=1) is not None
    True
    """
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:  # the server answered: reachable unless it refused outright
        return None if exc.code < 500 and exc.code not in (401, 403, 407) else f"HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:  # no route, no DNS, a timeout
        return str(getattr(exc, "reason", None) or exc) or type(exc).__name__


def fetch(dl: Download, directory: os.PathLike | str, log=None) -> Path:
    """Download ``dl`` into ``directory`` (via a temporary file), verify it, extract zip members.

    Returns the downloaded file's path.  An unverifiable file (no checksum known) is kept and
    reported as "unverified" on ``log``.
    """
    log = log if log is not None else sys.stderr  # looked up now: sys.stderr may have been replaced
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / dl.filename
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".part-")
    os.close(fd)
    try:
        print(f"downloading {dl.url} -> {target}", file=log)
        try:
            with urllib.request.urlopen(dl.url, timeout=120) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out, 1 << 20)
        except (urllib.error.URLError, OSError) as exc:  # HTTPError is a URLError; timeouts are OSErrors
            reason = getattr(exc, "reason", None) or exc
            raise DownloadError(
                f"cannot download {dl.url} ({reason}); on a machine with network, download it, "
                + (f"unzip it and put {', '.join(Path(m).name for m in dl.members)}" if dl.members else "put it")
                + f" into {directory}/ (or set FACTERLAB_DATA to a folder that has them)"
            ) from None
        status = verify(tmp, dl)
        os.replace(tmp, target)
        if status == "unverified":
            _record_sum(directory, dl.filename, file_sha256(target))
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(
        f"{dl.filename}: checksum {status}"
        + ("" if status == "verified" else " (no published checksum; check the file's origin yourself)"),
        file=log,
    )
    if dl.members:
        with zipfile.ZipFile(target) as zf:
            names = set(zf.namelist())
            for member in dl.members:
                if member not in names:
                    continue
                with zf.open(member) as src, open(directory / Path(member).name, "wb") as out:
                    shutil.copyfileobj(src, out)
    return target


def ensure_dataset(name: str, data_dir: os.PathLike | str | None = None, download: bool = False) -> Path:
    """Return ``<data_dir>/<subdir>`` once all files of ``name`` are there.

    Offline (``download=False``) a missing file raises FileNotFoundError with :func:`missing_message`;
    with ``download=True`` the pinned files are fetched and verified first.
    """
    src = source(name)
    directory = _data_dir(data_dir) / src.subdir
    if not missing_files(name, data_dir):
        return directory
    if not download:
        raise FileNotFoundError(missing_message(name, data_dir))
    for dl in src.downloads:
        if dl.members or not (directory / dl.filename).is_file():
            fetch(dl, directory)
    if missing_files(name, data_dir):
        raise FileNotFoundError(missing_message(name, data_dir))
    return directory
