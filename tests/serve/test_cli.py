"""``tokenforge serve``: its options, the tokenizers it loads or trains, and its
errors (uvicorn.run is replaced by a stub that keeps the app, so nothing listens)."""

import pytest
import uvicorn
from starlette.testclient import TestClient

import tokenforge.serve
from tokenforge import registry
from tokenforge.cli.main import main


@pytest.fixture
def served(monkeypatch):
    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    return calls


def test_serves_the_given_files(served, tiny_bpe, tmp_path, capsys):
    tiny_bpe.save(tmp_path / "tok")
    tiny_bpe.save(tmp_path / "other" / "tok")
    assert (
        main(["serve", str(tmp_path / "tok"), str(tmp_path / "other" / "tok"), "--port", "0", "--max-text", "100"]) == 0
    )
    ((app, kw),) = served
    assert kw["host"] == "127.0.0.1" and kw["port"] == 0
    # the deadlines and the connection bound of tokenforge.serve.server (issue 32 item 9)
    assert kw["http"].__name__ == "GuardedH11Protocol" and kw["limit_concurrency"] > 1
    assert "serving tok, tok-2 on http://127.0.0.1:0/" in capsys.readouterr().out
    with TestClient(app) as c:
        listing = c.get("/api/tokenizers").json()
        assert [t["name"] for t in listing["tokenizers"]] == ["tok", "tok-2"]
        assert listing["max_text"] == 100
        assert c.post("/api/encode", json={"tokenizer": "tok-2", "text": "hello"}).json()[
            "ids"
        ] == tiny_bpe.encode_ordinary("hello")
        assert c.post("/api/encode", json={"tokenizer": "tok", "text": "x" * 101}).status_code == 413


def test_without_files_trains_every_family(served, monkeypatch, capsys):
    real = tokenforge.serve.default_tokenizers
    monkeypatch.setattr(
        tokenforge.serve, "default_tokenizers", lambda **kw: real(vocab_size=512, max_bytes=200_000, **kw)
    )
    assert main(["serve"]) == 0
    ((app, kw),) = served
    assert kw["port"] == 8765
    out = capsys.readouterr().out
    assert "training bpe @512 (1/5)" in out and "training growing @512 (5/5)" in out
    with TestClient(app) as c:
        fams = {t["family"] for t in c.get("/api/tokenizers").json()["tokenizers"]}
    assert fams == {n for n in registry.BUILT_IN if registry.FAMILIES[n].spec.demo != ()}  # () : no demo


@pytest.mark.parametrize(
    "argv,status",
    [
        (["serve", "no/such/tokenizer"], 3),
        (["serve", "--max-text", "0"], 2),
        (["serve", "--max-text", "lots"], 2),
        (["serve", "--port", "70000"], 2),
    ],
)
def test_errors(served, argv, status, capsys):
    if status == 2:  # argparse: the command line is refused before anything runs
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
    else:
        assert main(argv) == status
    assert "error" in capsys.readouterr().err
    assert not served


def test_starlette_and_uvicorn_are_imported_only_to_serve():
    import subprocess
    import sys

    code = (
        "import sys, tokenforge, tokenforge.cli.main, tokenforge.serve, tokenforge.eval.report; "
        "tokenforge.cli.main.build_parser(); "
        "print(sorted(m for m in ('starlette', 'uvicorn') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
