"""``tokenforge compare``: train (or load) tokenizers, measure them, write a report.

:func:`run_compare` does the work of the command (see :mod:`tokenforge.cli.compare`):

1. reads the corpus documents (the built-in default corpus when no path is
   given) and splits off held-out documents (every tenth, unless held-out
   files are given; documents in them may carry a language: a ``lang`` field
   in JSON lines, or ``LANG=PATH``);
2. trains every spec of :mod:`tokenforge.eval.families` at every vocabulary
   size (each family as its record in :mod:`tokenforge.registry` says), or
   loads tokenizers from files; trained tokenizers are cached under
   ``OUT/tokenizers`` and reused when the spec, size and training text match;
3. measures compression on the held-out text (:mod:`tokenforge.eval.metrics`),
   and, when held-out documents carry languages, the per-language figures and
   the Gini of the premiums against ``reference_lang``
   (:mod:`tokenforge.eval.languages`);
4. with ``bpb``, trains the harness's GPT per tokenizer, embedding mode and seed
   (:mod:`tokenforge.eval.bpb`), on the same documents for every tokenizer; each
   seed's finished result is kept under ``OUT/work`` (keyed by the tokenizer's
   fingerprint, the settings, the texts and the seed; sealed and written
   atomically) and reused by a later run, so a killed run computes only the rest;
5. writes the report (:mod:`tokenforge.eval.report`) after every measured
   tokenizer and embedding mode, so an interrupted run leaves a consistent
   partial report.

After every tokenizer and every seed it logs one line for the whole run
(:class:`tokenforge.progress.RunEstimate`, on stderr): the steps done, the time
so far and the time left, estimated from the steps it computed so far. Ctrl-C
stops it cleanly: the report says it is partial, and what was finished is kept.

Not handled: estimates that know a bigger vocabulary trains slower (every step
of a kind counts the same), and reuse of a result after ``--threads`` changed
the summation order of a float (the thread count is not in the key).
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..data.corpus import corpus_paths
from ..data.fingerprint import texts_digest, tokenizer_fingerprint
from ..data.languages import TrainLanguages
from ..embedding_meta import EmbeddingModeError, get_embedding_metadata
from ..errors import TokenforgeError
from ..progress import RunEstimate
from ..registry import DEFAULT_SPEC, FAMILIES, family
from .bpb import BPBConfig, run_bpb, select_documents
from .families import Spec, parse_specs, train_tokenizer
from .languages import LangDoc, parse_heldout_arg, per_language_metrics, read_language_documents
from .metrics import compression_metrics
from .report import sample_cut, sample_paragraph

if TYPE_CHECKING:
    from ..base import Tokenizer

__all__ = ["CompareOptions", "run_compare", "load_corpus"]


@dataclasses.dataclass
class CompareOptions:
    corpus: list[str] = dataclasses.field(default_factory=list)  # paths; empty = the built-in corpus
    heldout: str | list[str] | None = None  # held-out files, each "PATH" or "LANG=PATH"
    parity_dev: list[str] | None = None  # bpe:parity's dev text: files, each "PATH" or "LANG=PATH"
    reference_lang: str = "en"  # the language premiums are measured against
    families: str = DEFAULT_SPEC
    vocab_sizes: list[int] = dataclasses.field(default_factory=lambda: [8192])
    load: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (label, path)
    train_mb: float | None = None
    eval_mb: float | None = 2.0
    bpb: bool = False
    seeds: list[int] = dataclasses.field(default_factory=lambda: [0])
    bpb_train_mb: float = 2.0
    bpb_eval_mb: float = 0.5
    embeddings: list[str] = dataclasses.field(default_factory=lambda: ["flat"])
    bpb_vocab_sizes: list[int] | None = (
        None  # BPB only for rows of these sizes (fixed-size families always); None = all
    )
    bpb_config: BPBConfig = dataclasses.field(default_factory=BPBConfig)
    threads: int | None = None
    out: str = "reports/compare"
    text_field: str = "text"
    progress: bool | None = None
    command: str = "tokenforge compare"
    title: str = "Tokenizer comparison"
    reuse: bool = True
    log: Callable[[str], None] | None = None  # status lines go here; default prints to stderr


def _mb(x: float | None) -> int | None:
    return None if x is None else int(x * 1_000_000)


def load_corpus(opts: CompareOptions) -> tuple[list[str], list[str], str]:
    """(training documents, held-out documents, description)."""
    train, held, desc = _load_corpus(opts)
    return [d.text for d in train], [d.text for d in held], desc


def _select_lang_docs(docs: Iterable[LangDoc], max_bytes: int | None) -> list[LangDoc]:
    """:func:`select_documents` on documents that keep their languages."""
    if max_bytes is None:
        return list(docs)
    out: list[LangDoc] = []
    left = int(max_bytes)
    for d in docs:  # streamed: only what is kept is read
        if left <= 0:
            break
        kept = select_documents([d.text], left)  # the last one is cut at a character boundary
        if kept:
            out.append(dataclasses.replace(d, text=kept[0]))
        left -= len(d.text.encode("utf-8"))
    return out


def _heldout_args(opts: CompareOptions) -> list[str]:
    h = opts.heldout
    return [] if not h else [h] if isinstance(h, str) else list(h)


def _parity_dev(opts: CompareOptions) -> list[LangDoc]:
    """The documents of ``--parity-dev`` (each with a language: ``LANG=PATH`` or a
    ``lang`` field in JSON lines); none when it is not given."""
    out: list[LangDoc] = []
    for arg in opts.parity_dev or []:
        lang, path = parse_heldout_arg(arg)
        docs = read_language_documents(path, lang, text_field=opts.text_field)
        for i, d in enumerate(docs):
            if d.lang is None:
                raise TokenforgeError(
                    f"--parity-dev {arg}: document {i + 1} has no language; give LANG=PATH or JSON lines with 'lang'"
                )
        if not docs:
            raise TokenforgeError(f"--parity-dev {arg}: no documents")
        out += docs
    return out


def _per_language(docs: list[LangDoc]) -> dict[str, dict]:
    """Per language, sorted: its documents, UTF-8 bytes and the set of its parallel units."""
    langs: dict[str, dict] = {}
    for d in docs:
        if d.lang is None:  # (the caller passes documents with a language only)
            continue
        e = langs.setdefault(d.lang, {"documents": 0, "bytes": 0, "parallel_units": set()})
        e["documents"] += 1
        e["bytes"] += len(d.text.encode("utf-8"))
        if d.parallel_id is not None:
            e["parallel_units"].add(d.parallel_id)
    return dict(sorted(langs.items()))


def _dev_summary(opts: CompareOptions, docs: list[LangDoc]) -> dict:
    """The ``corpus`` entries that say what ``--parity-dev`` gave."""
    per = {lang: {"documents": e["documents"], "bytes": e["bytes"]} for lang, e in _per_language(docs).items()}
    return {"parity_dev": ", ".join(opts.parity_dev or []), "parity_dev_languages": per}


def _load_corpus(opts: CompareOptions) -> tuple[list[LangDoc], list[LangDoc], str]:
    """(training documents and held-out documents, with their languages where
    JSON lines give them, and a description)."""
    if opts.corpus:
        paths = corpus_paths(list(opts.corpus), who="compare")
        train_iter = (d for p in paths for d in read_language_documents(p, text_field=opts.text_field))
        desc = ", ".join(str(p) for p in paths)
    else:
        from ..data.default_corpus import iter_default_corpus

        train_iter = (LangDoc(t) for t in iter_default_corpus())
        desc = f"the built-in corpus (Python {sys.version.split()[0]} standard library docs and sources)"
    heldout = _heldout_args(opts)
    if heldout:
        train = _select_lang_docs(train_iter, _mb(opts.train_mb))
        held = []
        for arg in heldout:
            lang, path = parse_heldout_arg(arg)
            held += read_language_documents(path, lang, text_field=opts.text_field)
        desc += f"; held out: {', '.join(heldout)}"
    else:
        docs = list(train_iter)
        held = [d for i, d in enumerate(docs) if i % 10 == 9]
        train = _select_lang_docs((d for i, d in enumerate(docs) if i % 10 != 9), _mb(opts.train_mb))
        desc += " (every tenth document held out)"
    if not train:
        raise TokenforgeError("the corpus has no training documents")
    if not held:
        raise TokenforgeError("the corpus has no held-out documents (give --heldout or more documents)")
    return train, held, desc


def _train_digest(docs: list[LangDoc]) -> str:
    """The training text's digest; documents' languages and parallel units count
    too when the corpus has any (``bpe:parity`` trains on them)."""
    if not any(d.lang is not None or d.parallel_id is not None for d in docs):
        return texts_digest(d.text for d in docs)
    return texts_digest(x for d in docs for x in (d.text, f"\0{d.lang}\0{d.parallel_id}"))


def _log(opts: CompareOptions, msg: str) -> None:
    if opts.log is not None:
        opts.log(msg)
    elif opts.progress is not False:
        print(msg, file=sys.stderr, flush=True)


def _cached_tokenizer(
    opts: CompareOptions,
    spec: Spec,
    vocab: int | None,
    train_docs: list[str],
    train_digest: str,
    languages: TrainLanguages | None = None,
) -> tuple[Tokenizer, float | None, bool]:
    """Train (or reuse the cached) tokenizer; returns (tok, seconds, reused).
    The documents of ``--parity-dev`` (``languages.dev``) are part of the cache
    key of the families that take languages (their dev text)."""
    from ..registry import load

    cache = Path(opts.out) / "tokenizers" / spec.slug(vocab)
    meta_path = cache / "meta.json"
    want = {"spec": spec.text, "vocab_size": vocab, "train_digest": train_digest}
    if languages is not None and languages.dev and family(spec.family).spec.reads_languages(spec.words):
        want["parity_dev_digest"] = _train_digest(list(languages.dev))
    if opts.reuse and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
            if all(meta.get(k) == v for k, v in want.items()):
                tok = load(cache / meta["file"])
                # the settings the file does not record (mixedgram's errors="replace",
                # LZ78's chunking), through the family's transport seam
                state = meta.get("state") or {}
                if state:
                    tok = type(tok).from_bytes(tok.to_bytes(), state)
                return tok, float(meta.get("train_seconds", 0.0)), True
        except (OSError, ValueError, TokenforgeError):
            pass  # unreadable cache: train again
    t0 = time.perf_counter()
    tok = train_tokenizer(
        spec, train_docs, vocab, num_threads=opts.threads, progress=opts.progress, languages=languages
    )
    secs = time.perf_counter() - t0
    try:
        from ..formats.atomic import atomic_write

        cache.mkdir(parents=True, exist_ok=True)
        tok.save(cache / "tokenizer")
        load(cache / "tokenizer")  # only cache what can be read back
        meta = {**want, "file": "tokenizer", "train_seconds": secs, "class": type(tok).__name__}
        meta["state"] = tok.transport_state()
        atomic_write(meta_path, json.dumps(meta, indent=1))
    except Exception as e:  # caching is an optimisation; the run goes on without it
        _log(opts, f"  (not cached: {type(e).__name__}: {e})")
    return tok, secs, False


def _environment() -> dict:
    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }
    try:
        from .._core import __version__

        env["tokenforge"] = __version__
    except ImportError:  # pragma: no cover
        pass
    try:
        env["loadavg at start (1/5/15 min)"] = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        pass
    return env


def run_compare(opts: CompareOptions) -> dict:
    """Run the comparison and write the report; returns the results dict."""
    from .report import write_report

    specs = parse_specs(opts.families) if opts.families else []
    for mode in opts.embeddings:
        if mode not in ("flat", "structured", "hierarchical", "tuple"):
            raise EmbeddingModeError(
                f"unknown embedding mode {mode!r}; expected flat, structured, hierarchical or tuple"
            )
    t_start = time.perf_counter()
    train_lang_docs, held_lang_docs, desc = _load_corpus(opts)
    train_docs = [d.text for d in train_lang_docs]
    dev_docs = _parity_dev(opts)
    languages = (
        TrainLanguages(tuple(train_lang_docs), opts.reference_lang, tuple(dev_docs))
        if any(d.lang is not None for d in train_lang_docs)
        else None
    )
    held_docs = [d.text for d in held_lang_docs]
    lang_docs = [d for d in held_lang_docs if d.lang is not None]
    eval_docs = select_documents(held_docs, _mb(opts.eval_mb))
    train_digest = _train_digest(train_lang_docs)
    if dev_docs and not any(family(s.family).spec.reads_languages(s.words) for s in specs):
        _log(opts, "note: no spec trains on the --parity-dev text (it is bpe:parity's dev text)")
    results: dict = {
        "title": opts.title,
        "command": opts.command,
        "status": "running",
        "corpus": {
            "description": desc,
            "train_documents": len(train_docs),
            "train_bytes": sum(len(d.encode("utf-8")) for d in train_docs),
            "eval_documents": len(eval_docs),
            "eval_bytes": sum(len(d.encode("utf-8")) for d in eval_docs),
            **(_dev_summary(opts, dev_docs) if dev_docs else {}),
        },
        "rows": [],
        "skipped": [],
        **(_language_setup(opts, lang_docs) if lang_docs else {}),
        "sample_text": sample_paragraph(eval_docs),
        "environment": _environment(),
    }
    out = Path(opts.out)
    if opts.bpb:
        bpb_train = select_documents(train_docs, _mb(opts.bpb_train_mb))
        bpb_eval = select_documents(held_docs, _mb(opts.bpb_eval_mb))
        results["bpb_setup"] = {
            "config": opts.bpb_config.to_dict(),
            "seeds": list(opts.seeds),
            "embeddings": list(opts.embeddings),
            "train_bytes": sum(len(d.encode("utf-8")) for d in bpb_train),
            "eval_bytes": sum(len(d.encode("utf-8")) for d in bpb_eval),
            "train_documents": len(bpb_train),
            "eval_documents": len(bpb_eval),
        }
        bpb_digest = texts_digest(bpb_train + ["\0eval\0"] + bpb_eval)[:12]

    # ---- which tokenizers --------------------------------------------------
    jobs: list[tuple[str, Spec | None, int | None, str | None]] = []  # (label, spec, vocab, path)
    for spec in specs:
        for vocab in [None] if spec.fixed_vocab else opts.vocab_sizes:
            jobs.append((spec.label(vocab), spec, vocab, None))
    for label, path in opts.load:
        jobs.append((label, None, None, path))
    if not jobs:
        raise TokenforgeError("nothing to compare: no available family and no --load")

    n_models = len(opts.embeddings) * len(opts.seeds)
    est = RunEstimate(
        {
            "tokenizers": len(jobs),
            "bits-per-byte runs": sum(n_models for _, spec, vocab, _ in jobs if _wants_bpb(opts, spec, vocab)),
        },
        names={"tokenizers": "tokenizer", "bits-per-byte runs": "bits-per-byte run"},
        clock=time.perf_counter,
        start=t_start,  # the time so far counts reading the corpus too
    )

    def save(status: str) -> None:
        results["status"] = status
        results["elapsed_seconds"] = round(time.perf_counter() - t_start, 1)
        write_report(results, out)

    try:
        _run_jobs(
            opts,
            jobs,
            results,
            save,
            train_docs,
            train_digest,
            eval_docs,
            (bpb_train, bpb_eval, bpb_digest) if opts.bpb else None,
            out,
            est,
            lang_docs,
            languages,
        )
    except KeyboardInterrupt:
        # keep what is finished: the report says it is partial; shards and tokenizers stay for a rerun
        results["rows"] = [r for r in results["rows"] if "metrics" in r or r.get("error")]
        try:
            save("interrupted")
        except Exception:  # the interrupt matters more than a report that could not be written
            pass
        raise
    save("complete")
    return results


def _wants_bpb(opts: CompareOptions, spec: Spec | None, vocab: int | None) -> bool:
    """Whether the job of ``spec`` at ``vocab`` (``spec`` None: a loaded file) gets bits per byte."""
    fixed = spec is None or spec.fixed_vocab
    return opts.bpb and (fixed or opts.bpb_vocab_sizes is None or vocab in opts.bpb_vocab_sizes)


def _cached_file(opts: CompareOptions, spec: Spec, vocab: int | None) -> str | None:
    """The file :func:`_cached_tokenizer` keeps ``spec``'s tokenizer in (None if it kept none)."""
    cache = Path(opts.out) / "tokenizers" / spec.slug(vocab)
    try:
        return str(cache / json.loads((cache / "meta.json").read_text())["file"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _language_setup(opts: CompareOptions, lang_docs: list[LangDoc]) -> dict:
    """The report's description of the per-language held-out set."""
    langs = _per_language(lang_docs)
    if opts.reference_lang not in langs:
        raise TokenforgeError(
            f"the reference language {opts.reference_lang!r} has no held-out documents (languages: "
            f"{', '.join(sorted(langs))}); pass --reference-lang with one of them"
        )
    for e in langs.values():
        e["parallel_units"] = len(e["parallel_units"])
    return {
        "languages": {
            "reference": opts.reference_lang,
            "max_bytes_per_language": _mb(opts.eval_mb),
            "held_out": langs,
        }
    }


def _run_jobs(
    opts: CompareOptions,
    jobs: list[tuple[str, Spec | None, int | None, str | None]],
    results: dict,
    save: Callable[[str], None],
    train_docs: list[str],
    train_digest: str,
    eval_docs: list[str],
    bpb_data: tuple[list[str], list[str], str] | None,
    out: Path,
    est: RunEstimate,
    lang_docs: Sequence[LangDoc] = (),
    languages: TrainLanguages | None = None,
) -> None:
    if bpb_data is not None:
        bpb_train, bpb_eval, bpb_digest = bpb_data
    n_models = len(opts.embeddings) * len(opts.seeds)

    def progress(kind: str, seconds: float | None) -> None:
        _log(opts, "compare: " + est.step(kind, seconds))

    for label, spec, vocab, path in jobs:
        t_job = time.perf_counter()
        row: dict = {
            "label": label,
            "spec": spec.text if spec else f"file:{path}",
            "family": spec.family if spec else None,
            "vocab_size": vocab,
        }
        results["rows"].append(row)
        try:
            if spec is None:
                from ..registry import load

                assert path is not None  # a job without a spec is a file to load (the jobs above)
                _log(opts, f"loading {label} from {path}")
                tok, secs, reused = load(path), None, True
            else:
                _log(opts, f"training {label} on {results['corpus']['train_bytes'] / 1e6:.1f} MB")
                tok, secs, reused = _cached_tokenizer(opts, spec, vocab, train_docs, train_digest, languages)
                if reused:
                    _log(opts, f"  reused the cached {label}")
            row.update(cls=type(tok).__name__, family=row["family"] or tok.family, train_seconds=secs, reused=reused)
            t0 = time.perf_counter()
            row["metrics"] = compression_metrics(tok, eval_docs, num_threads=opts.threads)
            row["metrics_seconds"] = time.perf_counter() - t0
            if row["vocab_size"] is None:
                row["vocab_size"] = row["metrics"]["model_vocab_size"]
            fam = FAMILIES.get(row["family"])
            if fam is not None and fam.report is not None:  # the family's own measurement, under its name
                row[fam.name] = fam.report.measure(tok, train_docs, opts.threads)
            if lang_docs:
                try:
                    row["languages"] = per_language_metrics(
                        tok,
                        lang_docs,
                        reference=opts.reference_lang,
                        max_bytes_per_lang=_mb(opts.eval_mb),
                        num_threads=opts.threads,
                    )
                except (TokenforgeError, ValueError) as e:  # the reference language itself cannot be encoded
                    row["languages"] = {"error": f"{type(e).__name__}: {e}", "gini": None}
            # the report's side-by-side paragraph, and the file the playground serves it from
            row["sample"] = sample_cut(tok, results["sample_text"])
            row["serve_name"] = spec.slug(vocab) if spec else re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
            row["serve_path"] = str(path) if spec is None else _cached_file(opts, spec, vocab)
            m = row["metrics"]
            _log(
                opts,
                f"  {label}: {m['bytes_per_token']:.3f} bytes/token, {100 * m['vocab_utilisation']:.1f}% of ids used, "
                f"Rényi efficiency {m['renyi_efficiency']:.3f}"
                + (
                    f", Gini of language premiums {row['languages']['gini']:.3f}"
                    if row.get("languages", {}).get("gini") is not None
                    else ""
                ),
            )
        except Exception as e:  # one family failing must not end a long comparison; the report says why
            row["error"] = f"{type(e).__name__}: {e}"
            _log(opts, f"  {label}: failed: {row['error']}")
            save("running")
            if _wants_bpb(opts, spec, vocab):
                est.drop("bits-per-byte runs", n_models)
            progress("tokenizers", time.perf_counter() - t_job)
            continue
        progress("tokenizers", None if reused else time.perf_counter() - t_job)
        if _wants_bpb(opts, spec, vocab):
            save("running")  # the tokenizer's figures, before the long part
            row["bpb"] = {}
            fp: str | None = None
            fp_full: str | None = None
            for mode in opts.embeddings:
                finished = 0
                t_seed = time.perf_counter()

                def on_result(run: dict, reused: bool) -> None:
                    nonlocal finished, t_seed
                    finished += 1
                    if reused:
                        _log(opts, f"  reused the cached result of seed {run['seed']}: {run['bpb']:.4f} bits per byte")
                    progress("bits-per-byte runs", None if reused else time.perf_counter() - t_seed)
                    t_seed = time.perf_counter()

                try:
                    if mode != "flat":
                        get_embedding_metadata(tok, mode)  # refuse early, before pretokenizing
                    if fp is None:
                        fp_full = tokenizer_fingerprint(tok, scratch_dir=out)
                        fp = fp_full[len("sha256:") :][:12]
                    name = spec.slug(vocab) if spec else re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
                    work = out / "work" / f"{name}-{fp}-{bpb_digest}"
                    cfg = dataclasses.replace(opts.bpb_config, embedding=mode)
                    _log(opts, f"  bits per byte of {label} [{mode}], seeds {', '.join(map(str, opts.seeds))}")
                    res = run_bpb(
                        tok,
                        bpb_train,
                        bpb_eval,
                        work,
                        cfg=cfg,
                        seeds=opts.seeds,
                        num_threads=opts.threads,
                        progress=opts.progress,
                        label=f"{label} [{mode}]",
                        reuse=opts.reuse,
                        fingerprint=fp_full,
                        on_result=on_result,
                    )
                    row["bpb"][mode] = res
                    results["bpb_setup"].setdefault("params_blocks", res["runs"][0]["params_blocks"])
                    s = res["bpb"]
                    _log(
                        opts,
                        f"  {label} [{mode}]: {s['mean']:.4f} ± {s['std']:.4f} bits per byte over {s['n']} seed(s)",
                    )
                except Exception as e:  # e.g. a tree mode on a flat dictionary, a lossy tokenizer, out of memory
                    row["bpb"][mode] = {"error": f"{type(e).__name__}: {e}"}
                    _log(opts, f"  {label} [{mode}]: not measured: {e}")
                    est.drop("bits-per-byte runs", len(opts.seeds) - finished)
                save("running")
        else:
            save("running")
