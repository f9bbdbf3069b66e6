"""A transformers tokenizer directory: what ``AutoTokenizer.from_pretrained(dir)`` reads.

Three files:

* ``tokenizer.json``          the Hugging Face tokenizers file (:mod:`.hf_json`);
* ``tokenizer_config.json``   ``tokenizer_class`` (``PreTrainedTokenizerFast``),
                              the roles of the special tokens (bos, eos, pad, unk),
                              ``model_max_length`` when given, and the chat template;
* ``special_tokens_map.json`` the roles again (what older transformers read).

The roles come from the tokenizer's own special tokens (:func:`special_roles`):

* nanochat's layout: bos ``<|bos|>``; eos ``<|assistant_end|>`` (where an
  assistant turn ends, so generation after the chat template stops there);
  pad ``<|bos|>`` (distinct from eos, so collators that drop padding from the
  labels keep eos; nanochat's loss mask is 0 on BOS anyway);
* the growing vocabulary's ``<|bos|>``, ``<|eos|>``, ``<|pad|>`` and ``<|unk|>``
  take their own roles;
* a GPT-2 style ``<|endoftext|>`` is bos and eos, and pad when there is no other;
* no special token at all: no roles (padding then needs ``pad_token=``).

Any role can be set by the caller. The chat template is
:data:`tokenforge.chat.CHAT_TEMPLATE` when the tokenizer has all nine of
nanochat's special tokens (none otherwise, unless given).

:func:`read_pretrained` reads such a directory back from its ``tokenizer.json``
(with :func:`.hf_json.read_hf_json`); the two JSON configuration files must
parse as objects, and their roles must name tokens of the vocabulary.

Not handled: a ``generation_config.json`` (that belongs to a model, not to a
tokenizer: a base model that should also stop at the next document sets
``eos_token_id=[<|assistant_end|>, <|bos|>]`` there); slow (Python) tokenizer
files; tokenizer files in subfolders.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..errors import FormatError, SpecialTokenError
from .atomic import atomic_write_all
from .bpe_data import BPEData
from .hf_json import hf_json_dict, read_hf_json

__all__ = [
    "TOKENIZER_FILE",
    "CONFIG_FILE",
    "SPECIAL_MAP_FILE",
    "special_roles",
    "pretrained_files",
    "write_pretrained",
    "read_pretrained",
    "sniff_pretrained",
]

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
SPECIAL_MAP_FILE = "special_tokens_map.json"
ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
_UNSET = object()


def special_roles(specials: dict[str, int]) -> dict[str, str | None]:
    """bos/eos/pad/unk chosen from a tokenizer's special tokens (module docstring)."""
    from ..chat import SPECIAL_TOKENS

    bos: str | None
    eos: str | None
    pad: str | None
    if "<|bos|>" in specials:
        bos = "<|bos|>"
        eos = next((t for t in ("<|assistant_end|>", "<|eos|>") if t in specials), bos)
        pad = "<|pad|>" if "<|pad|>" in specials else bos
    elif "<|endoftext|>" in specials:
        bos = eos = pad = "<|endoftext|>"
    elif specials:
        bos = eos = pad = min(specials, key=specials.__getitem__)
    else:
        bos = eos = pad = None
    if bos is not None and eos == pad:
        others = [t for t in sorted(specials, key=specials.__getitem__) if t != eos and t not in SPECIAL_TOKENS]
        pad = others[0] if others else pad
    unk = "<|unk|>" if "<|unk|>" in specials else None
    return {"bos_token": bos, "eos_token": eos, "pad_token": pad, "unk_token": unk}


def pretrained_files(
    data: BPEData,
    *,
    bos_token: object = _UNSET,
    eos_token: object = _UNSET,
    pad_token: object = _UNSET,
    unk_token: object = _UNSET,
    model_max_length: int | None = None,
    chat_template: object = _UNSET,
    pretty: bool = True,
    document: dict | None = None,
) -> dict[str, bytes]:
    """The three files' contents (name -> bytes). ``document``: the
    ``tokenizer.json`` to write (default :func:`.hf_json.hf_json_dict` of ``data``)."""
    from ..chat import CHAT_TEMPLATE, SPECIAL_TOKENS

    specials = dict(data.special_tokens)
    roles = special_roles(specials)
    given = {"bos_token": bos_token, "eos_token": eos_token, "pad_token": pad_token, "unk_token": unk_token}
    for role, value in given.items():
        if value is _UNSET:
            continue
        if value is not None and (not isinstance(value, str) or value not in specials):
            known = ", ".join(sorted(specials)) or "none"
            raise SpecialTokenError(f"{role}={value!r} is not a special token of this tokenizer (known: {known})")
        roles[role] = value
    if model_max_length is not None and (
        isinstance(model_max_length, bool) or not isinstance(model_max_length, int) or model_max_length < 1
    ):
        raise ValueError(f"model_max_length must be a positive int, not {model_max_length!r}")
    if chat_template is _UNSET:
        chat_template = CHAT_TEMPLATE if all(t in specials for t in SPECIAL_TOKENS) else None
    if chat_template is not None and not isinstance(chat_template, str):
        raise TypeError(f"chat_template must be a str (Jinja) or None, not {type(chat_template).__name__}")
    config: dict = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **roles,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t, i in sorted(specials.items(), key=lambda kv: kv[1])
        },
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "padding_side": "right",
    }
    if model_max_length is not None:
        config["model_max_length"] = model_max_length
    if chat_template is not None:
        config["chat_template"] = chat_template
    special_map = {k: v for k, v in roles.items() if v is not None}
    indent = 2 if pretty else None

    def dump(obj: object) -> bytes:
        return (json.dumps(obj, ensure_ascii=False, indent=indent) + "\n").encode("utf-8")

    return {
        TOKENIZER_FILE: dump(hf_json_dict(data) if document is None else document),
        CONFIG_FILE: dump(config),
        SPECIAL_MAP_FILE: dump(special_map),
    }


def write_pretrained(
    directory: str | os.PathLike[str], data: BPEData, *, extra_files: dict[str, bytes] | None = None, **options: Any
) -> list[Path]:
    """Write the three files (and ``extra_files``, name -> bytes) into
    ``directory`` (created if missing); each is complete in its temporary file
    before any is renamed. Returns the paths."""
    files = {**(extra_files or {}), **pretrained_files(data, **options)}
    directory = Path(directory)
    # one save (atomic_write_all): every file complete before any is renamed; the
    # first listed (the file load reads) is renamed last
    atomic_write_all([(directory / name, content) for name, content in files.items()])
    return [directory / name for name in files]


def sniff_pretrained(path: str | os.PathLike[str], head: bytes) -> bool:
    """A directory with ``tokenizer.json`` and ``tokenizer_config.json``."""
    p = Path(path)
    return p.is_dir() and (p / TOKENIZER_FILE).is_file() and (p / CONFIG_FILE).is_file()


def _read_object(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            raw = f.read(16 * 1024 * 1024 + 1)
    except OSError as e:
        raise FormatError(f"cannot read: {e.strerror or e}", path=path) from None
    if len(raw) > 16 * 1024 * 1024:
        raise FormatError("larger than 16 MiB; a tokenizer configuration is a few KiB", path=path)
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise FormatError(f"not valid JSON: {str(e)[:200]}", path=path) from None
    if not isinstance(value, dict):
        raise FormatError(f"expected a JSON object, found {type(value).__name__}", path=path)
    return value


def read_pretrained(directory: str | os.PathLike[str]) -> BPEData:
    """Read a transformers tokenizer directory (its ``tokenizer.json``); the
    configuration files are checked to parse and to name tokens the vocabulary has."""
    d = Path(directory)
    data = read_hf_json(d / TOKENIZER_FILE)
    specials = data.special_tokens
    for name in (CONFIG_FILE, SPECIAL_MAP_FILE):
        p = d / name
        if not p.is_file():
            continue
        config = _read_object(p)
        for role in ROLES:
            value = config.get(role)
            if isinstance(value, dict):  # transformers also writes {"content": ..., ...}
                value = value.get("content")
            if value is not None and value not in specials:
                raise FormatError(
                    f"{role} {str(value)[:60]!r} is not one of the tokenizer's special tokens "
                    f"({', '.join(sorted(specials)) or 'none'})",
                    path=p,
                )
    return data
