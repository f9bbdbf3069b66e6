"""The bits-per-byte harness: how well a small language model predicts text
tokenized by each tokenizer, in units that do not depend on the tokenizer.

For one tokenizer and one seed, :func:`train_and_evaluate`

1. pretokenizes the training documents and the held-out documents into shards
   (:func:`tokenforge.data.shards.pretokenize`; BOS before every document);
2. trains the GPT of :mod:`tokenforge.torch.gpt` on the training windows for
   ``epochs`` passes (every tokenizer sees the same documents, i.e. the same
   bytes; a tokenizer with longer tokens gets fewer, longer steps), AdamW with
   linear warm-up and cosine decay;
3. scores every held-out token once, in non-overlapping windows of ``seq_len``:

       BPB = Σ nats / (ln 2 × Σ bytes of the scored targets)

   A target that is a special token (the BOS of each following document) has
   no bytes and is not scored. Σ bytes uses the tokenizer's exact byte length
   per id (``token_bytes``, raw bytes, so a token that is not valid UTF-8 on its
   own counts what it holds) and must equal the UTF-8 length of the held-out
   text the tokenizer saw, or the run stops with :class:`BPBError`.

:func:`run_bpb` repeats this for several seeds and reports mean ± standard
deviation (sample std, ``ddof=1``). Each seed's finished result is kept, sealed,
in the work directory (:func:`write_result`, keyed by :func:`result_key`: the
tokenizer's fingerprint, the settings, the texts, the seed), so a run that was
killed, run again, trains only the seeds it had not finished. Any embedding mode of
:mod:`tokenforge.torch.embeddings` can be chosen. Progress is shown per seed;
Ctrl-C stops cleanly (nothing is written but the resumable shards).

:func:`bits_per_byte` is the scoring step alone, for any callable that returns
per-token losses; the tests check it on a hand-computed case.

Not handled: sliding-window evaluation (each window starts without context,
the same for every tokenizer), and tokenizers that cannot represent the text
(e.g. latin1-only ones on other text): those fail the byte check.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ..embedding_meta import model_vocab_size
from ..errors import TokenforgeError

if TYPE_CHECKING:
    from ..base import Tokenizer
    from ..data.shard_reader import ShardSet
    from ..progress import Progress
    from ..torch.gpt import GPT

__all__ = [
    "BPBConfig",
    "BPBError",
    "bits_per_byte",
    "select_documents",
    "train_and_evaluate",
    "run_bpb",
    "summarize",
]

LN2 = math.log(2.0)


class BPBError(TokenforgeError):
    """The harness cannot give a sound bits-per-byte figure (e.g. bytes that do not add up)."""


@dataclasses.dataclass
class BPBConfig:
    """Model and training settings (the defaults are the harness's default model)."""

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    seq_len: int = 256
    batch_size: int = 8
    epochs: float = 1.0
    lr: float = 3e-3
    min_lr_frac: float = 0.1
    warmup_frac: float = 0.05
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    embedding: str = "flat"
    device: str = "cpu"
    threads: int | None = None
    eval_batch_size: int = 16
    autocast: str | None = None  # "bf16": bfloat16 autocast (faster on recent CPUs and on GPUs); None: float32

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------------------
# documents and bytes
# ---------------------------------------------------------------------------
def _truncate_utf8(text: str, max_bytes: int) -> str:
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def select_documents(docs: Iterable[str], max_bytes: int | None) -> list[str]:
    """The first documents of ``docs`` holding at most ``max_bytes`` UTF-8 bytes.

    The last document is cut at a character boundary so the budget is met
    exactly (or as nearly as a character boundary allows). The same call on
    the same documents gives every tokenizer the same text.
    """
    out: list[str] = []
    if max_bytes is None:
        return list(docs)
    left = int(max_bytes)
    for d in docs:
        if left <= 0:
            break
        n = len(d.encode("utf-8"))
        if n > left:
            d = _truncate_utf8(d, left)
            n = len(d.encode("utf-8"))
            if d:
                out.append(d)
            break
        out.append(d)
        left -= n
    return out


def text_bytes_seen(tok: Tokenizer, docs: Sequence[str]) -> int:
    """UTF-8 bytes of the documents as the tokenizer sees them (after its normalisation, if any)."""
    return sum(len(tok.normalize(d).encode("utf-8")) for d in docs)


# ---------------------------------------------------------------------------
# scoring
# ---------------------------------------------------------------------------
def _windows(n: int, seq_len: int) -> Iterator[tuple[int, int]]:
    """(start, length) of non-overlapping windows whose targets cover positions 1..n-1 once."""
    start = 0
    while start < n - 1:
        length = min(seq_len, n - 1 - start)
        yield start, length
        start += length


def bits_per_byte(
    nll_fn: Callable,
    streams: Sequence[np.ndarray],
    token_bytes: np.ndarray,
    special_ids: Iterable[int],
    *,
    seq_len: int,
    batch_size: int = 16,
    expected_bytes: int | None = None,
    progress: Progress | None = None,
) -> dict:
    """Score token streams with ``nll_fn`` and return bits per byte.

    ``nll_fn(inputs, targets)`` gets int64 arrays ``(B, T)`` (targets ``-1`` at
    unscored positions) and returns per-position losses in nats ``(B, T)``
    (numpy or torch; ignored where the target is ``-1``). ``streams`` are the
    token sequences (e.g. one per shard, each starting with BOS); in each,
    every position after the first is a target exactly once, in windows of at
    most ``seq_len`` inputs. ``token_bytes[id]`` is the exact byte length of
    an id; ``special_ids`` are never scored. With ``expected_bytes``, the
    summed target bytes must equal it (:class:`BPBError` otherwise).

    Returns ``{"bpb", "nats", "bytes", "scored_tokens", "tokens"}``.
    """
    tb = np.asarray(token_bytes, dtype=np.int64)
    specials = np.asarray(sorted(int(i) for i in special_ids), dtype=np.int64)
    total_nats = 0.0
    total_bytes = 0
    scored = 0
    tokens = 0
    for stream in streams:
        s = np.asarray(stream, dtype=np.int64)
        tokens += len(s)
        wins = list(_windows(len(s), seq_len))
        # group windows of equal length into batches
        by_len: dict[int, list[int]] = {}
        for start, length in wins:
            by_len.setdefault(length, []).append(start)
        for length, starts in by_len.items():
            for b in range(0, len(starts), batch_size):
                chunk = starts[b : b + batch_size]
                idx = np.asarray(chunk, dtype=np.int64)[:, None] + np.arange(length + 1)[None, :]
                block = s[idx]
                inputs, targets = block[:, :-1], block[:, 1:].copy()
                special = np.isin(targets, specials)
                targets[special] = -1
                nll = nll_fn(inputs, targets)
                if hasattr(nll, "detach"):
                    nll = nll.detach().to("cpu").double().numpy()
                nll = np.asarray(nll, dtype=np.float64)
                keep = ~special
                total_nats += float(nll[keep].sum())
                total_bytes += int(tb[targets[keep]].sum())
                scored += int(keep.sum())
                if progress is not None:
                    progress.update(int(targets.size))
    if expected_bytes is not None and total_bytes != expected_bytes:
        raise BPBError(
            f"the scored tokens hold {total_bytes:,} bytes but the evaluated text has {expected_bytes:,} UTF-8 bytes: "
            "the tokenizer's token_bytes() is not the exact byte length of its ids, or it does not encode this "
            "text losslessly (e.g. characters it cannot represent), so bits per byte would be wrong"
        )
    if total_bytes == 0:
        raise BPBError("nothing to score: the evaluated text has no bytes")
    return {
        "bpb": total_nats / (LN2 * total_bytes),
        "nats": total_nats,
        "bytes": total_bytes,
        "scored_tokens": scored,
        "tokens": tokens,
    }


# ---------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------
def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise TokenforgeError("the bits-per-byte harness needs PyTorch: pip install 'tokenforge[torch]'") from None
    return torch


def _device(name: str) -> Any:
    torch = _torch()
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise TokenforgeError(f"device {name!r} asked for, but torch sees no CUDA device; use --device cpu")
    return torch.device(name)


def _lr_at(step: int, steps: int, cfg: BPBConfig) -> float:
    warm = max(1, int(cfg.warmup_frac * steps))
    if step < warm:
        return cfg.lr * (step + 1) / warm
    t = (step - warm) / max(1, steps - warm)
    return cfg.lr * (cfg.min_lr_frac + (1 - cfg.min_lr_frac) * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))


def _special_ids(tok: Tokenizer) -> list[int]:
    return sorted(set(int(i) for i in tok.special_tokens.values()))


def _token_bytes(tok: Tokenizer) -> np.ndarray:
    vocab = model_vocab_size(tok)
    tb = np.asarray(tok.token_bytes(), dtype=np.int64)
    if len(tb) < vocab:
        tb = np.concatenate([tb, np.zeros(vocab - len(tb), np.int64)])
    return tb[:vocab]


def build_model(tok: Tokenizer, cfg: BPBConfig) -> GPT:
    """The GPT of the harness for this tokenizer and config (on the CPU)."""
    from ..torch.gpt import GPT, GPTConfig

    gcfg = GPTConfig(
        vocab_size=model_vocab_size(tok),
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_embd=cfg.n_embd,
        seq_len=cfg.seq_len,
        embedding=cfg.embedding,
    )
    return GPT(gcfg, tokenizer=tok)


def train_and_evaluate(
    tok: Tokenizer,
    train_shards: ShardSet,
    eval_shards: ShardSet,
    cfg: BPBConfig,
    seed: int,
    *,
    expected_bytes: int | None = None,
    progress: bool | None = None,
    label: str = "",
) -> dict:
    """Train one model (one seed) on ``train_shards`` and score ``eval_shards``; see the module docstring."""
    torch = _torch()
    from ..progress import progress_bar
    from ..torch.dataset import ShardDataset

    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    device = _device(cfg.device)
    if cfg.autocast not in (None, "bf16"):
        raise TokenforgeError(f"autocast must be None or 'bf16', not {cfg.autocast!r}")

    def amp() -> Any:
        if cfg.autocast == "bf16":
            return torch.autocast(device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    specials = _special_ids(tok)
    tb = _token_bytes(tok)
    torch.manual_seed(seed)
    np.random.seed(seed % (2**32))
    model = build_model(tok, cfg).to(device)
    data = ShardDataset(train_shards, cfg.seq_len, mask_special=specials)
    if len(data) == 0:
        raise BPBError(
            f"the training text gives fewer than {cfg.seq_len + 1} tokens: raise the byte budget or lower seq_len"
        )
    gen = torch.Generator().manual_seed(seed)
    per_epoch = math.ceil(len(data) / cfg.batch_size)
    steps = max(1, int(round(per_epoch * cfg.epochs)))
    decay: list = []
    no_decay: list = []
    for n, p in model.named_parameters():
        (decay if p.dim() >= 2 and not n.startswith("embed.") else no_decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=cfg.lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    t0 = time.perf_counter()
    losses = []
    step = 0
    desc = f"{label} seed {seed}: training" if label else f"seed {seed}: training"
    model.train()
    with progress_bar(total=steps, desc=desc, unit="steps", enabled=progress is not False, interval=15.0) as bar:
        while step < steps:
            order = torch.randperm(len(data), generator=gen).tolist()
            for b in range(0, len(order), cfg.batch_size):
                if step >= steps:
                    break
                xs, ys = zip(*(data[k] for k in order[b : b + cfg.batch_size]))
                x = torch.stack(xs).to(device)
                y = torch.stack(ys).to(device)
                for g in opt.param_groups:
                    g["lr"] = _lr_at(step, steps, cfg)
                with amp():
                    loss = model.loss(x, y)
                if not torch.isfinite(loss):
                    raise BPBError(f"training diverged at step {step} (loss {loss.item()}); lower the learning rate")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
                opt.step()
                losses.append(float(loss.item()))
                step += 1
                bar.update(1)
    train_s = time.perf_counter() - t0

    model.eval()
    streams = [np.asarray(eval_shards.tokens(i)) for i in range(eval_shards.num_shards)]
    t1 = time.perf_counter()

    def nll_fn(inputs: np.ndarray, targets: np.ndarray) -> Any:
        with torch.no_grad(), amp():
            return model.token_nll(torch.from_numpy(inputs).to(device), torch.from_numpy(targets).to(device))

    total = sum(max(0, len(s) - 1) for s in streams)
    with progress_bar(
        total=total,
        desc=f"{label} seed {seed}: evaluating".strip(),
        unit="tokens",
        enabled=progress is not False,
        interval=15.0,
    ) as bar:
        res = bits_per_byte(
            nll_fn,
            streams,
            tb,
            specials,
            seq_len=cfg.seq_len,
            batch_size=cfg.eval_batch_size,
            expected_bytes=expected_bytes,
            progress=bar,
        )
    eval_s = time.perf_counter() - t1
    tail = losses[-max(1, len(losses) // 10) :]
    res.update(
        seed=seed,
        steps=steps,
        train_tokens=int(train_shards.num_tokens),
        train_bytes=int(train_shards.num_bytes),
        final_train_loss=float(np.mean(tail)),
        train_seconds=train_s,
        eval_seconds=eval_s,
        params_blocks=model.num_parameters("blocks"),
        params_embedding=model.num_parameters("embedding"),
        params_head=model.num_parameters("head"),
        loadavg=_loadavg(),
    )
    return res


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def summarize(values: Sequence[float]) -> dict:
    """mean, sample std (ddof=1; 0 for one value), min, max, n."""
    v = np.asarray(values, dtype=np.float64)
    return {
        "mean": float(v.mean()) if len(v) else float("nan"),
        "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
        "min": float(v.min()) if len(v) else float("nan"),
        "max": float(v.max()) if len(v) else float("nan"),
        "n": int(len(v)),
    }


#: the file a finished (tokenizer, settings, texts, seed) result is kept in
RESULT_FORMAT, RESULT_VERSION = "tokenforge-bpb-result", 1
#: settings that do not decide a result (how many CPU threads run it) and are left out of its key
_NOT_IN_KEY = ("threads",)


def result_key(fingerprint: str, cfg: BPBConfig, seed: int, train_digest: str, eval_digest: str) -> dict:
    """Everything that decides one seed's bits per byte: the tokenizer's
    fingerprint, the model and training settings (but the thread count), the seed,
    the digests of the training and held-out texts, and the versions of
    tokenforge and torch that compute it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = None
    try:
        tf_version: str | None = version("tokenforge")
    except PackageNotFoundError:  # pragma: no cover: run from a source tree
        tf_version = None
    return {
        "tokenizer": fingerprint,
        "config": {k: v for k, v in cfg.to_dict().items() if k not in _NOT_IN_KEY},
        "seed": int(seed),
        "train_text": train_digest,
        "eval_text": eval_digest,
        "tokenforge": tf_version,
        "torch": torch_version,
    }


def result_path(results_dir: str | os.PathLike[str], key: dict) -> Path:
    """Where the result of ``key`` is kept: ``seed<N>-<16 hex of the key's hash>.json``."""
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return Path(results_dir) / f"seed{key['seed']}-{digest}.json"


def read_result(path: str | os.PathLike[str], key: dict) -> dict | None:
    """The result kept at ``path`` for ``key``, or None when there is none to trust:
    no file, another format or version, a checksum that does not match its content
    (a file changed or cut short after it was written), or another key."""
    import json

    from ..formats.checksum import KEY, json_checksum

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != RESULT_FORMAT or doc.get("version") != RESULT_VERSION:
        return None
    try:
        if doc.get(KEY) != json_checksum(doc):
            return None
    except ValueError:  # NaN in a hand-edited file
        return None
    result = doc.get("result")
    return result if doc.get("key") == key and isinstance(result, dict) else None


def write_result(path: str | os.PathLike[str], key: dict, result: dict) -> None:
    """Keep one seed's finished result: sealed with its checksum and written
    atomically (temporary file, fsync, rename), so a run killed at any moment
    leaves either the whole file or none, never one that looks complete."""
    import json

    from ..formats.atomic import atomic_write
    from ..formats.checksum import seal_json_text

    doc = {"format": RESULT_FORMAT, "version": RESULT_VERSION, "key": key, "result": result}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, seal_json_text(json.dumps(doc, indent=1, allow_nan=False)))


def run_bpb(
    tok: Tokenizer,
    train_docs: Sequence[str],
    eval_docs: Sequence[str],
    work_dir: str | os.PathLike[str],
    *,
    cfg: BPBConfig | None = None,
    seeds: Sequence[int] = (0,),
    num_threads: int | None = None,
    progress: bool | None = None,
    label: str = "",
    reuse: bool = True,
    fingerprint: str | None = None,
    on_result: Callable[[dict, bool], None] | None = None,
) -> dict:
    """Bits per byte of ``tok`` over several seeds: ``{"bpb": summary, "runs": [...], ...}``.

    ``train_docs``/``eval_docs`` are the (already budgeted) documents; shards go
    under ``work_dir`` (``train/`` and ``eval/``) and are reused when present.
    Each seed's finished result is kept in ``work_dir/results/`` (:func:`write_result`,
    keyed by :func:`result_key`), and with ``reuse`` a seed whose result is there
    is not trained again: a killed run, run again, computes only what it had not
    finished. ``fingerprint``: the tokenizer's (:func:`tokenforge.data.fingerprint.tokenizer_fingerprint`),
    when the caller has it. ``on_result(run, reused)`` is called after each seed.
    """
    from ..data.corpus import Texts
    from ..data.fingerprint import texts_digest, tokenizer_fingerprint
    from ..data.shards import pretokenize

    cfg = cfg or BPBConfig()
    work = Path(work_dir)
    quiet = progress is False
    # texts, marked as such (the corpus rule: a list of str names files)
    train_shards = pretokenize(
        Texts(list(train_docs)), tok, work / "train", num_threads=num_threads, progress=False if quiet else None
    )
    eval_shards = pretokenize(
        Texts(list(eval_docs)), tok, work / "eval", num_threads=num_threads, progress=False if quiet else None
    )
    expected = text_bytes_seen(tok, eval_docs)
    if eval_shards.num_bytes != expected:  # refuse before spending any time on training
        raise BPBError(
            f"the held-out tokens hold {eval_shards.num_bytes:,} bytes but the text has {expected:,} UTF-8 bytes: "
            f"{type(tok).__name__} does not encode this text losslessly (or its token_bytes() is not exact), "
            "so its bits per byte would not be comparable"
        )
    fingerprint = fingerprint or tokenizer_fingerprint(tok, scratch_dir=work)
    train_digest, eval_digest = texts_digest(train_docs), texts_digest(eval_docs)
    runs = []
    for seed in seeds:
        key = result_key(fingerprint, cfg, int(seed), train_digest, eval_digest)
        path = result_path(work / "results", key)
        run = read_result(path, key) if reuse else None
        reused = run is not None
        if run is None:
            run = train_and_evaluate(
                tok, train_shards, eval_shards, cfg, int(seed), expected_bytes=expected, progress=progress, label=label
            )
            write_result(path, key, run)
        runs.append(run)
        if on_result is not None:
            on_result(run, reused)
    return {
        "bpb": summarize([r["bpb"] for r in runs]),
        "runs": runs,
        "config": cfg.to_dict(),
        "eval_bytes": expected,
        "eval_tokens": int(eval_shards.num_tokens),
        "train_bytes": int(train_shards.num_bytes),
        "train_tokens": int(train_shards.num_tokens),
    }
