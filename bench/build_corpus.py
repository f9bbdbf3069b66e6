#!/usr/bin/env python3
"""Build the benchmark text corpus from Debian documentation and the Python stdlib.

The corpus is real, mostly English prose (manuals, man pages, info pages,
references) plus Python source code. It is large (default 120 MB of training
text), deterministic for a given set of installed package versions, and never
committed: it lives under ``bench/data/`` which is git-ignored.

Usage::

    python bench/build_corpus.py                  # install packages, build 120 MB
    python bench/build_corpus.py --target-mb 200  # a bigger training set
    python bench/build_corpus.py --no-install     # use whatever is installed
    python bench/build_corpus.py --force          # rebuild even if up to date
    python bench/build_corpus.py --list-packages  # print the package list

Steps:

1. ``apt-get install -y --no-install-recommends`` the packages in
   :data:`PACKAGES` that are not installed yet (root needed; skipped with
   ``--no-install``; packages the archive does not have are skipped with a
   warning).
2. Collect candidate files: every file ``dpkg -L`` lists for those packages
   (so the corpus does not depend on whatever else happens to be installed),
   plus the ``.py`` files of the running interpreter's standard library.
3. Extract plain text, in parallel: text files as they are, ``.gz`` files
   decompressed, HTML stripped to text with :mod:`html.parser`, man pages
   rendered with ``groff -Tutf8 -man`` (plain roff stripping if groff is
   missing), info files with their navigation lines removed. Files that are not
   UTF-8 are dropped; non-English translations are skipped; each manual is
   taken in one rendering only (reST sources over info over HTML, see
   :func:`_drop_shadowed`).
4. Deduplicate identical documents (sha256 of the text; the first path in sorted
   order wins).
5. Split: a document is held out when the hash of its path falls in the first
   5% of the hash space (:data:`HELDOUT_PERCENT`), over the whole pool. The
   rest is ordered by the hash of its path (a fixed, seed-free shuffle, so any
   prefix is a representative mix of all sources rather than, say, only Python
   code) and taken until ``--target-mb`` is reached.

Outputs (``--out``, default ``bench/data/corpus/``), each written atomically::

    train.jsonl       one document per line: {"text": ..., "source": "pkg:path"}
    heldout.jsonl     same format, disjoint from train
    heldout.txt       held-out documents joined by a blank line
    train_50mb.txt    first 50 MB of training text, documents joined by "\\n\\n"
    train_10mb.txt    first 10 MB of the same
    MANIFEST.json     config, package versions, counts, bytes, sha256 of each file

MB means 10**6 bytes of UTF-8 everywhere in bench/.

Re-running is cheap: when MANIFEST.json records the same configuration and the
same input files (paths, sizes, mtimes) and every output still has the recorded
size and sha256, nothing is rebuilt.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
from concurrent.futures import ProcessPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

BUILDER_VERSION = 1
MB = 1_000_000
HELDOUT_PERCENT = 5
SLICES = {"train_50mb.txt": 50, "train_10mb.txt": 10}
DEFAULT_OUT = Path(__file__).resolve().parent / "data" / "corpus"
MIN_DOC_CHARS = 100

#: Debian (bookworm) packages that carry large amounts of English prose, with
#: what each contributes. All are in ``main``; together they install about 1 GB
#: and yield roughly 200 MB of text. ``python3.11-doc`` is what ``python3-doc``
#: pulls in on bookworm.
PACKAGES: dict[str, str] = {
    "python3.11-doc": "Python 3.11 manuals (reST sources)",
    "sphinx-doc": "Sphinx manual (reST sources)",
    "docutils-doc": "Docutils / reStructuredText manuals",
    "python-requests-doc": "Requests library manual",
    "python-django-doc": "Django documentation (HTML)",
    "debian-handbook": "The Debian Administrator's Handbook (HTML, English only)",
    "debian-reference-en": "Debian Reference (HTML)",
    "debian-policy": "Debian Policy Manual and related specifications",
    "developers-reference": "Debian Developer's Reference",
    "debian-faq": "Debian FAQ",
    "manpages": "Linux man pages, sections 4, 5, 7",
    "manpages-dev": "Linux man pages, sections 2 and 3 (system calls, libc)",
    "glibc-doc": "GNU C library man pages (pthreads etc.)",
    "perl-doc": "Perl manual and core module documentation (man pages)",
    "tcl8.6-doc": "Tcl manual pages",
    "postgresql-doc-15": "PostgreSQL 15 manual (HTML)",
    "git-doc": "Git manual pages and user manual (AsciiDoc text)",
    "apache2-doc": "Apache HTTP Server manual (HTML)",
    "nodejs-doc": "Node.js API documentation (Markdown)",
    "cmake-doc": "CMake manual (reST sources)",
    "sqlite3-doc": "SQLite documentation (HTML)",
    "bash-doc": "Bash reference manual (info)",
    "zsh-doc": "Zsh manual (info)",
    "gettext-doc": "GNU gettext manual (HTML)",
    "autoconf-doc": "Autoconf manual (info)",
    "gnu-standards": "GNU coding standards and maintainer guide",
    "flex-doc": "Flex manual (HTML)",
    "binutils-doc": "GNU binutils manuals (info)",
    "r-doc-info": "R manuals (info)",
    "gnuplot-doc": "gnuplot manual (info)",
    "octave-doc": "GNU Octave manual (info)",
    "maxima-doc": "Maxima manual (info)",
    "linux-doc-6.1": "Linux kernel documentation (reST sources)",
    "python-sqlalchemy-doc": "SQLAlchemy documentation (reST sources)",
    "python-flask-doc": "Flask documentation (reST sources)",
    "python-jinja2-doc": "Jinja documentation (reST sources)",
    "vim-runtime": "Vim help files (plain text)",
    "erlang-doc": "Erlang/OTP documentation (HTML)",
    "python-scipy-doc": "SciPy reference and user guide (HTML)",
}

TEXT_EXTS = {".txt", ".rst", ".md", ".text"}
HTML_EXTS = {".html", ".htm", ".xhtml"}
#: Extension-less documentation files worth keeping (README, NEWS, FAQ, ...).
PLAIN_NAME = re.compile(r"^(README|NEWS|FAQ|TODO|THANKS|AUTHORS|HACKING|BUGS|INSTALL|USAGE)([._-].*)?$")
#: Generated index pages and single-page concatenations of manuals that also ship page by page.
SKIP_NAMES = {"genindex.html", "search.html", "py-modindex.html", "all.html"}
SKIP_DIR_PARTS = {"_static", "_images", "__pycache__", "site-packages", "po"}
#: Path components naming a translation other than English (``fr``, ``pt-BR``...).
NON_ENGLISH = set(
    "ar bg bn ca cs da de el eo es et eu fa fi fr gl he hi hr hu hy id is it ja ka kk km kn ko lt lv mk ml "
    "mr ms nb ne nl nn pl pt ro ru si sk sl sq sr sv ta te th tl tr uk ur uz vi zh".split()
)
LANG_DIR = re.compile(r"^([a-z]{2})(?:[-_][A-Za-z]{2,4})?$")
MAN_DIR = re.compile(r"^/usr/share/man/man[0-9][^/]*/")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
MANY_BLANK = re.compile(r"\n{3,}")


def log(msg: str) -> None:
    print(f"[corpus] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# packages
# --------------------------------------------------------------------------
def installed_versions(names) -> dict[str, str]:
    """name -> version for the packages of ``names`` that are installed."""
    out = {}
    for name in names:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", name], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.startswith("install ok installed"):
            out[name] = r.stdout.split("\t", 1)[1]
    return out


def install_packages(names) -> None:
    have = installed_versions(names)
    missing = [n for n in names if n not in have]
    if not missing:
        log(f"all {len(names)} packages already installed")
        return
    if shutil.which("apt-get") is None:
        log(f"WARNING: apt-get not found; cannot install {len(missing)} packages")
        return
    # Keep only what the archive knows, so one renamed package does not sink the rest;
    # refresh the package lists once if they do not know some (a fresh machine has none).
    available = [n for n in missing if _has_candidate(n)]
    if len(available) < len(missing):
        log("apt-get update (some packages are unknown to the package lists)")
        subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        available = [n for n in missing if _has_candidate(n)]
    for name in missing:
        if name not in available:
            log(f"WARNING: package {name} is not in the archive; skipped")
    if not available:
        return
    log(f"apt-get install {len(available)} packages: {' '.join(available)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *available]
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        # Lists older than the archive name versions it no longer holds (404): refresh once, retry.
        log(f"apt-get install failed (exit {r.returncode}); apt-get update, then once more")
        subprocess.run(["apt-get", "update", "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-4000:])
        raise SystemExit(
            f"apt-get install failed (exit {r.returncode}); run `apt-get update` as root, or use --no-install"
        )


def _has_candidate(name: str) -> bool:
    r = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True)
    return "Candidate:" in r.stdout and "Candidate: (none)" not in r.stdout


def package_files(name: str) -> list[str]:
    r = subprocess.run(["dpkg", "-L", name], capture_output=True, text=True)
    return r.stdout.splitlines() if r.returncode == 0 else []


# --------------------------------------------------------------------------
# candidate selection
# --------------------------------------------------------------------------
def _strip_gz(path: str) -> str:
    return path[:-3] if path.endswith(".gz") else path


def classify(path: str) -> str | None:
    """The extraction kind of a documentation file, or None to skip it."""
    parts = path.split("/")
    name = parts[-1]
    if name in SKIP_NAMES or any(p in SKIP_DIR_PARTS for p in parts[:-1]):
        return None
    for p in parts[:-1]:
        m = LANG_DIR.match(p)
        if m and m.group(1) in NON_ENGLISH:
            return None
    if path.startswith("/usr/share/man/"):
        return "man" if MAN_DIR.match(path) else None  # English sections only
    base = _strip_gz(name)
    if path.startswith("/usr/share/info/"):
        return "info" if re.search(r"\.info(-\d+)?$", base) else None
    ext = os.path.splitext(base)[1].lower()
    if ext in TEXT_EXTS:
        return "text"
    if ext in HTML_EXTS:
        return "html"
    if PLAIN_NAME.match(base):
        return "text"
    return None


def _drop_shadowed(cands: dict[str, tuple[str, str]]) -> None:
    """Keep one rendering of each manual, so the same text does not appear twice.

    * a package that ships reStructuredText sources (``.rst`` files or a Sphinx
      ``_sources/`` tree) contributes those, not its HTML or info renderings;
    * otherwise a package that ships info manuals contributes those, not HTML
      or ``.text`` renderings of the same Texinfo sources;
    * an HTML page with a same-named ``.txt``/``.md``/``.rst`` sibling is dropped.
    """
    rst_pkgs, info_pkgs, stems = set(), set(), set()
    for path, (kind, pkg) in cands.items():
        base = _strip_gz(path)
        if "/_sources/" in path or base.endswith(".rst"):
            rst_pkgs.add(pkg)
        if kind == "info":
            info_pkgs.add(pkg)
        if kind == "text":
            stems.add(os.path.splitext(base)[0])
    for path, (kind, pkg) in list(cands.items()):
        base = _strip_gz(path)
        if pkg in rst_pkgs:
            drop = kind in ("html", "info")
        elif pkg in info_pkgs:
            drop = kind == "html" or base.endswith(".text")
        else:
            drop = kind == "html" and os.path.splitext(base)[0] in stems
        if drop:
            del cands[path]


def stdlib_files() -> tuple[str, list[str]]:
    root = sysconfig.get_paths()["stdlib"]
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "__pycache__", "dist-packages"))
        files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    return root, sorted(files)


def collect_candidates(packages: list[str]) -> dict[str, tuple[str, str]]:
    """path -> (kind, source label), for regular (non-symlink) files."""
    cands: dict[str, tuple[str, str]] = {}
    for pkg in packages:
        for path in package_files(pkg):
            if path in cands or not os.path.isfile(path) or os.path.islink(path):
                continue
            kind = classify(path)
            if kind:
                cands[path] = (kind, pkg)
    _drop_shadowed(cands)
    _, py = stdlib_files()
    label = f"python{sys.version_info.major}.{sys.version_info.minor}-stdlib"
    for path in py:
        if not os.path.islink(path):
            cands.setdefault(path, ("python", label))
    return dict(sorted(cands.items()))


def fingerprint(cands: dict[str, tuple[str, str]]) -> str:
    h = hashlib.sha256()
    for path, (kind, src) in cands.items():
        st = os.stat(path)
        h.update(f"{path}\0{kind}\0{src}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


# --------------------------------------------------------------------------
# extraction (runs in worker processes)
# --------------------------------------------------------------------------
class _HTMLText(HTMLParser):
    """Visible text of an HTML page: block structure as newlines, <pre> kept,
    scripts, styles, <head> and navigation containers dropped."""

    SKIP_TAGS = {"script", "style", "head", "nav", "noscript", "svg", "math", "template", "button", "form"}
    SKIP_CLASSES = {
        "related",
        "sphinxsidebar",
        "sphinxsidebarwrapper",
        "footer",
        "header",
        "navheader",
        "navfooter",
        "navigation",
        "breadcrumb",
        "breadcrumbs",
        "toc",
        "sidebar",
        "headerlink",
        "menu",
    }
    BLOCK = {
        "p",
        "div",
        "section",
        "article",
        "main",
        "table",
        "ul",
        "ol",
        "dl",
        "blockquote",
        "pre",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "figure",
        "center",
        "address",
        "body",
        "caption",
    }
    LINE = {"br", "li", "tr", "dt", "dd", "td", "th"}
    VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "wbr", "param"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip_tag: str | None = None
        self.skip_nest = 0
        self.pre = 0

    def handle_starttag(self, tag, attrs):
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_nest += 1
            return
        if tag not in self.VOID:
            classes = set()
            role = ""
            for k, v in attrs:
                if k == "class" and v:
                    classes.update(v.split())
                elif k == "role" and v:
                    role = v
            if tag in self.SKIP_TAGS or classes & self.SKIP_CLASSES or role == "navigation":
                self.skip_tag, self.skip_nest = tag, 1
                return
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCK:
            self.out.append("\n\n")
        elif tag in self.LINE:
            self.out.append("\n" if tag not in ("td", "th") else " ")
            if tag == "li":
                self.out.append("- ")

    def handle_endtag(self, tag):
        if self.skip_tag is not None:
            if tag == self.skip_tag:
                self.skip_nest -= 1
                if self.skip_nest == 0:
                    self.skip_tag = None
            return
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in self.BLOCK:
            self.out.append("\n\n")

    def handle_data(self, data):
        if self.skip_tag is not None:
            return
        if self.pre:
            self.out.append(data.replace("\n", "\x00"))  # protected from whitespace folding
        else:
            self.out.append(re.sub(r"\s+", " ", data))

    def text(self) -> str:
        s = "".join(self.out)
        lines = [ln.strip(" ") for ln in s.split("\n")]
        s = "\n".join(lines)
        s = re.sub(r"(?m)^- *\n[ \n]*(?=\S)", "- ", s)  # <li><p>text: keep the bullet on the text's line
        return s.replace("\x00", "\n")


def html_to_text(src: str) -> str:
    p = _HTMLText()
    p.feed(src)
    p.close()
    return p.text()


def _roff_strip(src: str) -> str:
    """Crude roff -> text for when groff is unavailable."""
    out = []
    for line in src.splitlines():
        if line.startswith(('.\\"', "'\\\"")):
            continue
        if line.startswith((".", "'")):
            m = re.match(r"^[.'](SH|SS|TH|B|I|BR|IR|RB|RI|BI|IB|TP|IP)\s*(.*)$", line)
            if not m:
                continue
            line = m.group(2).replace('"', "")
        line = re.sub(r"\\f[BIRP]|\\f\(..|\\f\[[^]]*\]|\\s[+-]?\d", "", line)
        line = re.sub(r"\\\(em|\\\(en", "-", line).replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")
        out.append(line)
    return "\n".join(out)


def man_to_text(src: str, utf8_input: bool = False) -> str | None:
    """Render a man page; ``utf8_input`` runs groff's preconv (-k) first, which
    translated pages (German, Russian, Chinese) need for their non-ASCII text."""
    if src.lstrip().startswith(".so "):
        return None  # an alias page pointing at another page
    if shutil.which("groff"):
        r = subprocess.run(
            [
                "groff",
                *(["-k"] if utf8_input else []),
                "-Tutf8",
                "-man",
                "-t",
                "-P-cbou",
                "-rHY=0",
                "-rcR=1",
                "-rLL=100n",
            ],
            input=".ad l\n" + src,
            capture_output=True,
            text=True,
            errors="replace",
        )
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout
    return _roff_strip(src)


def info_to_text(src: str) -> str:
    src = src.split("\x1f\nTag Table:", 1)[0]
    out = []
    after_sep = False
    for line in src.split("\n"):
        if line.startswith("\x1f"):
            after_sep = True
            continue
        if after_sep and line.startswith("File: "):
            after_sep = False
            continue
        after_sep = False
        out.append(line)
    return "\n".join(out)


def normalize(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = CONTROL.sub("", text.replace("\f", "\n"))
    text = "\n".join(ln.rstrip() for ln in text.split("\n"))
    return MANY_BLANK.sub("\n\n", text).strip("\n") + "\n"


def extract(job: tuple[str, str]) -> tuple[str, str | None]:
    """(path, kind) -> (path, text or None). Never raises."""
    path, kind = job
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            raw = gzip.decompress(raw)
        try:
            src = raw.decode("utf-8")
        except UnicodeDecodeError:
            return path, None  # keep only UTF-8 text
        if kind == "info":  # index markers: NUL BS [index NUL BS ]
            src = re.sub(r"\x00\x08\[[^\x00]*\x00\x08\]", "", src)
        if "\x00" in src:
            return path, None
        if kind == "html":
            text = html_to_text(src)
        elif kind in ("man", "man-utf8"):
            text = man_to_text(src, utf8_input=kind == "man-utf8")
        elif kind == "info":
            text = info_to_text(src)
        else:
            text = src
        if text is None:
            return path, None
        text = normalize(text)
        return path, (text if len(text) >= MIN_DOC_CHARS else None)
    except Exception as e:  # a broken file must not stop the build
        return path, f"\0error: {type(e).__name__}: {e}"


# --------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------
def _hash_key(tag: str, path: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{tag}:{path}".encode()).digest()[:8], "big")


def is_heldout(path: str) -> bool:
    return _hash_key("heldout", path) % 10_000 < HELDOUT_PERCENT * 100


class AtomicWriter:
    """Write a file via a temporary sibling, fsync, then rename into place."""

    def __init__(self, path: Path):
        self.path = path
        self.tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        self.h = hashlib.sha256()
        self.n = 0

    def __enter__(self):
        self.f = open(self.tmp, "wb")
        return self

    def write(self, data: bytes) -> None:
        self.f.write(data)
        self.h.update(data)
        self.n += len(data)

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.f.flush()
                os.fsync(self.f.fileno())
        finally:
            self.f.close()
        if exc_type is None:
            os.replace(self.tmp, self.path)
        else:
            self.tmp.unlink(missing_ok=True)
        return False

    def info(self) -> dict:
        return {"bytes": self.n, "sha256": self.h.hexdigest()}


def write_jsonl(path: Path, docs) -> dict:
    with AtomicWriter(path) as w:
        for source, text in docs:
            w.write(json.dumps({"text": text, "source": source}, ensure_ascii=False).encode() + b"\n")
    return w.info()


def write_joined(path: Path, docs, limit_bytes: int | None = None) -> dict:
    """Documents joined by a blank line, cut (at a line break) to ``limit_bytes``."""
    with AtomicWriter(path) as w:
        first = True
        for _, text in docs:
            chunk = (b"" if first else b"\n\n") + text.rstrip("\n").encode()
            first = False
            if limit_bytes is not None and w.n + len(chunk) > limit_bytes:
                room = chunk[: limit_bytes - w.n]
                cut = room.rfind(b"\n")
                room = room[:cut] if cut > 0 else room.decode("utf-8", "ignore").encode()
                w.write(room)
                break
            w.write(chunk)
    return w.info()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def up_to_date(out: Path, config: dict, fp: str) -> bool:
    try:
        man = json.loads((out / "MANIFEST.json").read_text())
    except (OSError, ValueError):
        return False
    if man.get("config") != config or man.get("inputs_fingerprint") != fp:
        return False
    for name, info in man.get("files", {}).items():
        p = out / name
        if not p.is_file() or p.stat().st_size != info["bytes"] or file_sha256(p) != info["sha256"]:
            return False
    return bool(man.get("files"))


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------
def build(args) -> int:
    t0 = time.time()
    out: Path = args.out
    packages = list(PACKAGES)
    if not args.no_install:
        if os.geteuid() != 0:
            log("WARNING: not root, skipping apt-get install (use --no-install to silence)")
        else:
            install_packages(packages)
    versions = installed_versions(packages)
    absent = [p for p in packages if p not in versions]
    if absent:
        log(f"WARNING: {len(absent)} packages not installed, their text is missing: {' '.join(absent)}")

    log("listing candidate files")
    cands = collect_candidates([p for p in packages if p in versions])
    config = {
        "builder_version": BUILDER_VERSION,
        "target_mb": args.target_mb,
        "heldout_percent": HELDOUT_PERCENT,
        "packages": versions,
        "python_stdlib": f"{sys.version.split()[0]} {sysconfig.get_paths()['stdlib']}",
    }
    fp = fingerprint(cands)
    if not args.force and up_to_date(out, config, fp):
        log(f"corpus in {out} is up to date (MANIFEST.json matches); use --force to rebuild")
        return 0

    kinds: dict[str, int] = {}
    for kind, _ in cands.values():
        kinds[kind] = kinds.get(kind, 0) + 1
    log(
        f"{len(cands)} candidate files ({', '.join(f'{k}: {v}' for k, v in sorted(kinds.items()))}); "
        f"extracting with {args.jobs} processes"
    )

    texts: dict[str, str] = {}
    seen: dict[str, str] = {}
    dropped = {"not_utf8_or_short": 0, "duplicate": 0, "error": 0}
    jobs = [(p, k) for p, (k, _) in cands.items()]
    step = max(1, len(jobs) // 20)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        # map() keeps input order, so deduplication always keeps the same path
        for i, (path, text) in enumerate(pool.map(extract, jobs, chunksize=16), 1):
            if text is None:
                dropped["not_utf8_or_short"] += 1
            elif text.startswith("\0error:"):
                dropped["error"] += 1
                log(f"  skipped {path}: {text[8:]}")
            else:
                h = hashlib.sha256(text.encode()).hexdigest()
                if h in seen:
                    dropped["duplicate"] += 1
                else:
                    seen[h] = path
                    texts[path] = text
            if i % step == 0 or i == len(jobs):
                mb = sum(map(len, texts.values())) / MB if i == len(jobs) or i % (step * 5) == 0 else None
                log(
                    f"  {i}/{len(jobs)} files ({100 * i // len(jobs)}%)"
                    + (f", ~{mb:.0f} MB text" if mb else "")
                    + f", {time.time() - t0:.0f}s"
                )

    # split and order
    heldout = sorted((p for p in texts if is_heldout(p)), key=lambda p: _hash_key("order", p))
    pool_train = sorted((p for p in texts if not is_heldout(p)), key=lambda p: _hash_key("order", p))
    target = args.target_mb * MB
    train, size = [], 0
    for p in pool_train:
        if size >= target:
            break
        train.append(p)
        size += len(texts[p].encode())
    if size < target:
        log(f"WARNING: only {size / MB:.1f} MB of training text available, below the {args.target_mb} MB target")

    def docs(paths):
        return ((f"{cands[p][1]}:{p}", texts[p]) for p in paths)

    out.mkdir(parents=True, exist_ok=True)
    log(f"writing {len(train)} train documents ({size / MB:.1f} MB) and {len(heldout)} held-out documents to {out}")
    files = {
        "train.jsonl": write_jsonl(out / "train.jsonl", docs(train)),
        "heldout.jsonl": write_jsonl(out / "heldout.jsonl", docs(heldout)),
        "heldout.txt": write_joined(out / "heldout.txt", docs(heldout)),
    }
    for name, mb in SLICES.items():
        files[name] = write_joined(out / name, docs(train), mb * MB)

    def breakdown(paths):
        agg: dict[str, dict] = {}
        for p in paths:
            a = agg.setdefault(cands[p][1], {"docs": 0, "bytes": 0})
            a["docs"] += 1
            a["bytes"] += len(texts[p].encode())
        return dict(sorted(agg.items()))

    manifest = {
        "config": config,
        "inputs_fingerprint": fp,
        "candidates": len(cands),
        "dropped": dropped,
        "counts": {"pool_docs": len(texts), "train_docs": len(train), "heldout_docs": len(heldout)},
        "bytes": {
            "pool_text": sum(len(t.encode()) for t in texts.values()),
            "train_text": size,
            "heldout_text": sum(len(texts[p].encode()) for p in heldout),
        },
        "train_by_source": breakdown(train),
        "heldout_by_source": breakdown(heldout),
        "files": files,
        "build_seconds": round(time.time() - t0, 1),
    }
    with AtomicWriter(out / "MANIFEST.json") as w:
        w.write(json.dumps(manifest, indent=2).encode() + b"\n")
    for name, info in files.items():
        log(f"  {name:16s} {info['bytes'] / MB:9.1f} MB  sha256 {info['sha256'][:16]}")
    log(f"done in {time.time() - t0:.0f}s")
    return 0


# --------------------------------------------------------------------------
# text classes for bench/peers.py
# --------------------------------------------------------------------------
#: Translated man pages for the multilingual class: package -> man directory of the language.
LANG_PACKAGES: dict[str, tuple[str, str]] = {
    "de": ("manpages-de", "/usr/share/man/de/"),
    "ru": ("manpages-ru", "/usr/share/man/ru/"),
    "zh": ("manpages-zh", "/usr/share/man/zh_CN/"),
}
CLASSES_VERSION = 1


def _class_docs(corpus: Path, want, limit: int) -> list[tuple[str, str]]:
    """The first documents of train.jsonl (hash-shuffled order) whose source ``want`` accepts."""
    out, n = [], 0
    with open(corpus / "train.jsonl", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if want(d["source"]):
                out.append((d["source"], d["text"]))
                n += len(d["text"].encode())
                if n >= limit:
                    break
    return out


def _lang_docs(lang: str, limit: int, jobs: int) -> list[tuple[str, str]]:
    """Rendered man pages of one language (sorted by the hash of the path), up to ``limit`` bytes."""
    pkg, prefix = LANG_PACKAGES[lang]
    paths = sorted(
        (p for p in package_files(pkg) if p.startswith(prefix) and p.endswith(".gz")), key=lambda p: _hash_key("cls", p)
    )
    out, n = [], 0
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        for i in range(0, len(paths), 64):
            for path, text in ex.map(extract, [(p, "man-utf8") for p in paths[i : i + 64]]):
                if text and not text.startswith("\0error"):
                    out.append((f"{pkg}:{path}", text))
                    n += len(text.encode())
            if n >= limit:
                break
    return out


def build_classes(corpus: Path, out: Path, mb: float, install: bool, jobs: int) -> int:
    """Write the text classes of bench/peers.py into ``out``: english.jsonl (prose
    from the corpus, no Python), code.jsonl (the corpus's Python sources) and
    multilingual.jsonl (German, Russian and Chinese man pages, ``mb / 3`` each),
    about ``mb`` MB each, plus CLASSES.json. Languages whose package is not in
    the archive are left out with a warning (and listed in CLASSES.json)."""
    if not (corpus / "train.jsonl").is_file():
        log(f"{corpus / 'train.jsonl'} is missing: build the corpus first (python bench/build_corpus.py)")
        return 2
    pkgs = [p for p, _ in LANG_PACKAGES.values()]
    if install and os.geteuid() == 0:
        install_packages(pkgs)
    versions = installed_versions(pkgs)
    config = {
        "classes_version": CLASSES_VERSION,
        "mb": mb,
        "corpus": file_sha256(corpus / "MANIFEST.json")[:16],
        "packages": versions,
    }
    try:
        if json.loads((out / "CLASSES.json").read_text())["config"] == config:
            log(f"text classes in {out} are up to date")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    out.mkdir(parents=True, exist_ok=True)
    limit = int(mb * MB)
    classes = {
        "english": _class_docs(corpus, lambda s: not s.endswith(".py"), limit),
        "code": _class_docs(corpus, lambda s: s.endswith(".py"), limit),
    }
    multi, langs = [], {}
    for lang, (pkg, _) in LANG_PACKAGES.items():
        if pkg not in versions:
            log(f"WARNING: {pkg} is not installed; the multilingual class has no {lang!r} text")
            continue
        docs = _lang_docs(lang, limit // len(LANG_PACKAGES), jobs)
        langs[lang] = {"docs": len(docs), "bytes": sum(len(t.encode()) for _, t in docs)}
        multi += docs
    classes["multilingual"] = multi
    files = {}
    for name, docs in classes.items():
        files[f"{name}.jsonl"] = {**write_jsonl(out / f"{name}.jsonl", docs), "docs": len(docs)}
        log(f"{name}: {len(docs)} documents, {files[name + '.jsonl']['bytes'] / MB:.1f} MB")
    man = {"config": config, "languages": langs, "files": files}
    tmp = out / ".CLASSES.json.tmp"
    tmp.write_text(json.dumps(man, indent=2) + "\n")
    os.replace(tmp, out / "CLASSES.json")
    return 0


# --------------------------------------------------------------------------
# multilingual held-out sets (issue 16, item 1)
# --------------------------------------------------------------------------
#: language -> Debian package of its translated man pages (English: the originals beside them)
MULTI_LANGS: dict[str, str] = {
    "de": "manpages-de",
    "es": "manpages-es",
    "fr": "manpages-fr",
    "it": "manpages-it",
    "nl": "manpages-nl",
    "pl": "manpages-pl",
    "ru": "manpages-ru",
    "uk": "manpages-uk",
    "ja": "manpages-ja",
}
#: languages ``--multilingual-langs`` may add to those of :data:`MULTI_LANGS`
#: (Chinese: the issue-36 case of a language cheaper than English)
EXTRA_LANGS: dict[str, str] = {"zh": "manpages-zh"}
#: the man-page and locale directory of a language, where it is not the code
LANG_DIRS: dict[str, str] = {"zh": "zh_CN"}
MULTI_VERSION = 3
MULTI_HELDOUT_PERCENT = 20
#: Debian packages whose gettext message catalogs (``.mo``) give exactly parallel
#: text: each message's English original (``msgid``) and its translation into every
#: language of :data:`MULTI_LANGS`. Only messages translated into all nine are kept.
MESSAGE_PACKAGES = (
    "adduser", "apt", "bash", "coreutils", "diffutils", "findutils", "gettext", "gettext-base", "grep",
    "iso-codes", "libapt-pkg6.0", "libc-l10n", "libglib2.0-data", "libgtk-3-common", "libgtk2.0-common",
    "libpam-runtime", "libpopt0", "login", "make", "man-db", "psmisc", "sed", "shared-mime-info", "systemd",
    "tar", "wget", "xdg-user-dirs", "xkb-data",
)  # fmt: skip
#: the share (in % of the hash space of a message's English text) of the messages
#: that go to ``parallel-test.jsonl``; the rest go to ``parallel-dev.jsonl``
MESSAGE_TEST_PERCENT = 50
MAN_PAGE = re.compile(r"^man[0-9][^/]*/[^/]+\.gz$")
#: language -> Debian fortunes package (bookworm has no fortunes-fr, -nl, -uk or -ja;
#: the -off packages, offensive sections, are left out). More training text per
#: language, not parallel: these lines carry no ``parallel_id`` and never go to
#: the held-out set.
FORTUNE_LANGS: dict[str, str] = {
    "en": "fortunes",
    "de": "fortunes-de",
    "es": "fortunes-es",
    "it": "fortunes-it",
    "pl": "fortunes-pl",
    "ru": "fortunes-ru",
}
#: fortune files that are pictures, not prose (ASCII art, banners)
FORTUNE_SKIP = re.compile(r"art|banner", re.IGNORECASE)
OVERSTRIKE = re.compile(r".\x08")


def _fortune_files(pkg: str) -> list[str]:
    """The fortune files of ``pkg``: the text beside each ``.dat`` index (not the
    index, not the empty ``.u8`` links, not the offensive ``off/`` subdirectory,
    not the ASCII art), sorted."""
    out = []
    for path in package_files(pkg):
        if not path.startswith("/usr/share/games/fortunes/") or "/off/" in path:
            continue
        if path.endswith((".dat", ".u8")) or not os.path.isfile(path) or os.path.getsize(path) == 0:
            continue
        if not os.path.isfile(path + ".dat") and not os.path.isfile(re.sub(r"\.fortunes$", "", path) + ".dat"):
            continue
        if FORTUNE_SKIP.search(os.path.basename(path)):
            continue
        out.append(path)
    return sorted(out)


def fortune_text(path: str) -> str | None:
    """One fortune file as one document: its cookies (between ``%`` lines) joined by
    blank lines, overstriking (``X\\bX``) removed; None if not UTF-8 or too short."""
    try:
        with open(path, "rb") as f:
            src = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    src = OVERSTRIKE.sub("", src.replace("\r\n", "\n"))
    cookies = [c.strip("\n") for c in re.split(r"^%[ \t]*$", src, flags=re.MULTILINE)]
    text = normalize("\n\n".join(c for c in cookies if c.strip()))
    return text if len(text) >= MIN_DOC_CHARS else None


def _fortune_docs(versions: dict[str, str], limit: int) -> list[tuple[str, str, str, str]]:
    """(None, lang, path, text) for each language's fortune files, in the order of
    the hash of their path, up to ``limit`` bytes a language."""
    out = []
    for lang, pkg in FORTUNE_LANGS.items():
        if pkg not in versions:
            continue
        have = 0
        for path in sorted(_fortune_files(pkg), key=lambda p: _hash_key("fortune", p)):
            if have >= limit:
                break
            text = fortune_text(path)
            if text is None:
                continue
            out.append(("", lang, path, text))
            have += len(text.encode())
    return out


def _multi_units(versions: dict[str, str], langs: dict[str, str]) -> dict[str, dict[str, str]]:
    """Parallel units: ``man1/ls.1.gz`` -> {lang: path}, for pages translated into at
    least one language of ``langs`` whose English original is installed at the same place."""
    units: dict[str, dict[str, str]] = {}
    for lang, pkg in langs.items():
        if pkg not in versions:
            continue
        prefix = f"/usr/share/man/{LANG_DIRS.get(lang, lang)}/"
        for path in package_files(pkg):
            rel = path[len(prefix) :] if path.startswith(prefix) else ""
            if MAN_PAGE.match(rel) and os.path.isfile(path):
                units.setdefault(rel, {})[lang] = path
    for rel, langs in units.items():
        en = "/usr/share/man/" + rel
        if os.path.isfile(en):
            langs["en"] = en
    return {rel: langs for rel, langs in units.items() if "en" in langs and len(langs) >= 2}


def _read_catalog(path: str) -> dict[str, str] | None:
    """One gettext ``.mo`` file: English message -> translation (singular messages
    only; a ``msgctxt`` context is dropped; the header entry is not a message);
    None if the file cannot be read."""
    import gettext

    try:
        with open(path, "rb") as f:
            cat = gettext.GNUTranslations(f)._catalog  # type: ignore[attr-defined]
    except (OSError, ValueError, UnicodeDecodeError, LookupError, IndexError, struct.error) as e:
        log(f"WARNING: skipping {path}: {type(e).__name__}: {e}")
        return None
    out = {}
    for k, v in cat.items():
        if isinstance(k, str) and k and isinstance(v, str) and v.strip():
            out[k.split("\x04", 1)[-1]] = v  # msgctxt EOT msgid
    return out


def message_units(versions: dict[str, str], languages: dict[str, str] = MULTI_LANGS) -> dict[str, dict[str, list[str]]]:
    """Exactly parallel text from the gettext catalogs of :data:`MESSAGE_PACKAGES`:
    domain -> {"en": [English messages], lang: [their translations]} for every
    catalog (``/usr/share/locale/LANG/LC_MESSAGES/DOMAIN.mo``) translated into all
    of ``languages`` (default :data:`MULTI_LANGS`), keeping the messages every language translates. A
    message (its English text) is kept once, in the first domain in sorted order."""
    langs = sorted(languages)
    dirs = {LANG_DIRS.get(lang, lang): lang for lang in langs}
    files: dict[str, dict[str, str]] = {}
    for pkg in MESSAGE_PACKAGES:
        if pkg not in versions:
            continue
        for path in package_files(pkg):
            m = re.match(r"^/usr/share/locale/([^/]+)/LC_MESSAGES/([^/]+)\.mo$", path)
            if m and m.group(1) in dirs and os.path.isfile(path):
                files.setdefault(m.group(2), {})[dirs[m.group(1)]] = path
    seen: set[str] = set()
    units: dict[str, dict[str, list[str]]] = {}
    for domain in sorted(files):
        if len(files[domain]) < len(langs):
            continue
        cats = {lang: _read_catalog(files[domain][lang]) for lang in langs}
        if any(c is None for c in cats.values()):
            continue
        common = set.intersection(*(set(c) for c in cats.values() if c is not None))
        unit: dict[str, list[str]] = {"en": [], **{lang: [] for lang in langs}}
        for en in sorted(common):
            if en in seen:
                continue
            seen.add(en)
            unit["en"].append(en)
            for lang in langs:
                unit[lang].append(cats[lang][en])  # type: ignore[index]
        if unit["en"]:
            units[domain] = unit
    return units


def write_parallel_messages(out: Path, versions: dict[str, str], langs: dict[str, str] = MULTI_LANGS) -> dict:
    """``parallel-dev.jsonl`` and ``parallel-test.jsonl``: the messages of
    :func:`message_units`, each to one file by the hash of its English text
    (:data:`MESSAGE_TEST_PERCENT` to the test file); per file, one line per catalog
    and language, the messages joined by newlines, ``parallel_id`` "msg:DOMAIN".
    Every language has every unit, so the text is parallel exactly: the dev file
    is a parity dev set (``tokenforge compare --parity-dev``) and the test file a
    held-out set whose premiums compare the same content in every language."""
    units = message_units(versions, langs)
    info: dict = {"domains": len(units), "files": {}}
    for name, test in (("parallel-dev.jsonl", False), ("parallel-test.jsonl", True)):
        n = 0
        with AtomicWriter(out / name) as w:
            for domain, unit in sorted(units.items()):
                keep = [
                    i for i, en in enumerate(unit["en"]) if (_hash_key("msg", en) % 100 < MESSAGE_TEST_PERCENT) == test
                ]
                if not keep:
                    continue
                n += len(keep)
                for lang in sorted(unit):
                    text = "\n".join(unit[lang][i] for i in keep)
                    rec = {"text": text, "lang": lang, "parallel_id": f"msg:{domain}", "source": f"gettext:{domain}"}
                    w.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
        info["files"][name] = {**w.info(), "messages": n}
        log(f"{name}: {n} messages a language from {len(units)} catalogs")
    return info


def build_multilingual(
    out: Path, mb: float, install: bool, jobs: int, fortunes_mb: float = 1.0, langs: dict[str, str] = MULTI_LANGS
) -> int:
    """Near-parallel held-out (and training) text in ten languages from Debian's
    translated man pages: the same page rendered in English and in every language
    that translates it. Units (pages) are taken in the order of the hash of their
    name until every language has ``mb`` MB (or runs out); a unit goes whole to
    ``heldout.jsonl`` (``MULTI_HELDOUT_PERCENT`` of the hash space) or to
    ``train.jsonl``. Each line: ``{"text", "lang", "parallel_id", "source"}``
    (``parallel_id`` = the page, e.g. ``man1/ls.1``), the format ``tokenforge
    compare --heldout`` reads. Plus ``MANIFEST.json`` (packages, per-language
    documents and bytes). Languages whose package is missing are left out with
    a warning. Then each language's fortune cookies (:data:`FORTUNE_LANGS`, up
    to ``fortunes_mb`` MB a language, one document per fortune file) go to
    ``train.jsonl`` only, without ``parallel_id``: more training text, not
    parallel. Last, exactly parallel text from the gettext message catalogs of
    :data:`MESSAGE_PACKAGES` (:func:`write_parallel_messages`):
    ``parallel-dev.jsonl`` (a parity dev set) and ``parallel-test.jsonl`` (a
    held-out set), never in ``train.jsonl``. ``langs`` (language -> package)
    replaces :data:`MULTI_LANGS` (``--multilingual-langs``; the fortunes then come
    only for English and those languages)."""
    fortune_langs = {k: v for k, v in FORTUNE_LANGS.items() if k == "en" or k in langs}
    pkgs = list(langs.values()) + list(fortune_langs.values()) + list(MESSAGE_PACKAGES)
    if install and os.geteuid() == 0:
        install_packages(pkgs)
    versions = installed_versions(pkgs)
    for lang, pkg in [*langs.items(), *fortune_langs.items()]:
        if pkg not in versions:
            log(f"WARNING: {pkg} is not installed; no {lang!r} text from it")
    missing = [pkg for pkg in MESSAGE_PACKAGES if pkg not in versions]
    if missing:
        log(f"WARNING: not installed, so no parallel messages from their catalogs: {', '.join(missing)}")
    config = {"multi_version": MULTI_VERSION, "mb": mb, "fortunes_mb": fortunes_mb, "packages": versions}
    if langs != MULTI_LANGS:
        config["languages"] = sorted(langs)
    try:
        outputs = ("train.jsonl", "heldout.jsonl", "parallel-dev.jsonl", "parallel-test.jsonl")
        if json.loads((out / "MANIFEST.json").read_text())["config"] == config and all(
            (out / name).is_file() for name in outputs
        ):
            log(f"multilingual sets in {out} are up to date")
            return 0
    except (OSError, ValueError, KeyError):
        pass
    units = _multi_units(versions, langs)
    order = sorted(units, key=lambda r: _hash_key("multi", r))
    limit = int(mb * MB)
    have: dict[str, int] = {}
    kept: list[tuple[str, str, str, str]] = []  # (unit, lang, path, text)
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
        for i in range(0, len(order), 32):
            batch = [
                u for u in order[i : i + 32] if any(have.get(lang, 0) < limit for lang in units[u] if lang != "en")
            ]
            jobs_ = [(u, lang, path) for u in batch for lang, path in sorted(units[u].items())]
            texts = dict(
                zip(((u, lang) for u, lang, _ in jobs_), ex.map(extract, [(p, "man-utf8") for _, _, p in jobs_]))
            )
            for u in batch:
                got = {lang: texts[(u, lang)][1] for lang in units[u]}
                got = {lang: t for lang, t in got.items() if t and not t.startswith("\0error")}
                if "en" not in got or len(got) < 2:
                    continue  # an alias page, or no rendering: no parallel unit
                for lang, t in sorted(got.items()):
                    kept.append((u, lang, units[u][lang], t))
                    have[lang] = have.get(lang, 0) + len(t.encode())
            if all(have.get(lang, 0) >= limit for lang, pkg in langs.items() if pkg in versions):
                break
    fortunes = [f for f in _fortune_docs(versions, int(fortunes_mb * MB)) if f[1] in fortune_langs]
    out.mkdir(parents=True, exist_ok=True)
    stats: dict[str, dict] = {}
    files = {}
    for name, held in (("train.jsonl", False), ("heldout.jsonl", True)):
        rows = [k for k in kept if (_hash_key("multi-heldout", k[0]) % 100 < MULTI_HELDOUT_PERCENT) == held]
        with AtomicWriter(out / name) as w:
            for u, lang, path, text in rows + ([] if held else fortunes):
                if u:
                    pkg = langs.get(lang, "en")
                    rec = {"text": text, "lang": lang, "parallel_id": u[: -len(".gz")], "source": f"{pkg}:{path}"}
                else:  # a fortune file: training text only, not parallel
                    rec = {"text": text, "lang": lang, "source": f"{FORTUNE_LANGS[lang]}:{path}"}
                w.write(json.dumps(rec, ensure_ascii=False).encode() + b"\n")
                st = stats.setdefault(lang, {}).setdefault(name, {"docs": 0, "bytes": 0})
                st["docs"] += 1
                st["bytes"] += len(text.encode())
                if not u:
                    st["fortune_bytes"] = st.get("fortune_bytes", 0) + len(text.encode())
        files[name] = w.info()
    for lang in sorted(stats):
        h = stats[lang].get("heldout.jsonl", {"docs": 0, "bytes": 0})
        t = stats[lang].get("train.jsonl", {"docs": 0, "bytes": 0})
        log(
            f"{lang}: held out {h['docs']} pages ({h['bytes'] / MB:.2f} MB), train {t['docs']} ({t['bytes'] / MB:.2f} MB)"
        )
    messages = write_parallel_messages(out, versions, langs)
    man = {
        "config": config,
        "units": len({k[0] for k in kept}),
        "languages": stats,
        "files": files,
        "messages": messages,
    }
    tmp = out / ".MANIFEST.json.tmp"
    tmp.write_text(json.dumps(man, indent=2) + "\n")
    os.replace(tmp, out / "MANIFEST.json")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target-mb", type=int, default=120, help="training text to collect, in MB (default 120)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get install the packages")
    ap.add_argument("--force", action="store_true", help="rebuild even if MANIFEST.json matches")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="extraction processes")
    ap.add_argument("--list-packages", action="store_true", help="print the Debian packages used and exit")
    ap.add_argument(
        "--classes",
        type=Path,
        metavar="DIR",
        help="instead: write bench/peers.py's text classes (english, code, multilingual) into DIR from --out's corpus",
    )
    ap.add_argument("--classes-mb", type=float, default=3, help="MB of text per class (default 3)")
    ap.add_argument(
        "--multilingual",
        type=Path,
        metavar="DIR",
        help="instead: write near-parallel text in 10 languages (Debian's translated man pages) and exactly "
        "parallel messages (its gettext catalogs) into DIR",
    )
    ap.add_argument("--multilingual-mb", type=float, default=1.0, help="MB per language (default 1)")
    ap.add_argument(
        "--multilingual-langs",
        nargs="+",
        metavar="LANG",
        choices=sorted({**MULTI_LANGS, **EXTRA_LANGS}),
        help=f"with --multilingual: these languages beside English instead of {' '.join(MULTI_LANGS)} "
        f"(may add {' '.join(EXTRA_LANGS)}; e.g. de es it zh)",
    )
    ap.add_argument(
        "--fortunes-mb",
        type=float,
        default=1.0,
        help="with --multilingual: MB of fortune cookies per language added to train.jsonl (default 1; 0: none)",
    )
    args = ap.parse_args(argv)
    if args.multilingual:
        every = {**MULTI_LANGS, **EXTRA_LANGS}
        langs = {k: every[k] for k in args.multilingual_langs} if args.multilingual_langs else MULTI_LANGS
        return build_multilingual(
            args.multilingual, args.multilingual_mb, not args.no_install, args.jobs, args.fortunes_mb, langs
        )
    if args.classes:
        return build_classes(args.out, args.classes, args.classes_mb, not args.no_install, args.jobs)
    if args.list_packages:
        for name, why in PACKAGES.items():
            print(f"{name:22s} {why}")
        return 0
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
