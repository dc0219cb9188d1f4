"""Run records read plain or packed (``cos_integrations.research.jsonl``)."""

import gzip
import json

import pytest

from cos_integrations.research.jsonl import append_jsonl, existing, pack, read_jsonl, unpack


def test_pack_round_trip_reproducible_and_the_plain_name_still_reads(tmp_path):
    path = tmp_path / "run.docs.jsonl"
    assert existing(path) is None and read_jsonl(path) == []
    for i in range(3):
        append_jsonl(path, {"doc_id": f"d{i}", "method": "rag"})
    first = pack(path)
    assert first.name == "run.docs.jsonl.gz" and not path.exists()
    assert existing(path) == first
    assert [r["doc_id"] for r in read_jsonl(path)] == ["d0", "d1", "d2"]
    data = first.read_bytes()
    # the same records pack to the same bytes (no time or name in the header): no churn
    unpack(path)
    assert pack(path).read_bytes() == data
    assert gzip.decompress(data).decode().count("\n") == 3


def test_appending_to_a_packed_file_keeps_what_it_held(tmp_path):
    path = tmp_path / "answers.jsonl"
    append_jsonl(path, {"key": "a"})
    pack(path)
    append_jsonl(path, {"key": "b"})  # a resumed run: unpacked, then appended
    # both exist now; the plain file is the newer superset and is the one read
    assert existing(path) == path
    assert [r["key"] for r in read_jsonl(path)] == ["a", "b"]
    pack(path)
    assert [r["key"] for r in read_jsonl(path)] == ["a", "b"]


def test_a_bad_line_names_the_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"ok": 1}) + "\n\n{not json\n")
    pack(path)
    with pytest.raises(ValueError, match=r"bad\.jsonl\.gz, line 3: not JSON"):
        read_jsonl(path)


def test_bytes_that_are_not_utf8_name_the_file_and_line(tmp_path):
    """The same line reader serves run records and `cos eval` datasets (``lines``)."""
    path = tmp_path / "cache.jsonl"
    path.write_bytes(json.dumps({"key": "a"}).encode() + b"\n\n\xff\xfe\n")
    with pytest.raises(ValueError, match=r"cache\.jsonl, line 3: not UTF-8 text \(byte 1\)"):
        read_jsonl(path)
    pack(path)
    with pytest.raises(ValueError, match=r"cache\.jsonl\.gz, line 3: not UTF-8"):
        read_jsonl(path)
