"""facterlab.models.gguf_cache.one_parse: a GGUF file's metadata parsed once per load, not once per
transformers call (config, tokenizer, weights)."""

from __future__ import annotations

import pytest

gguf = pytest.importorskip("gguf")
np = pytest.importorskip("numpy")

from facterlab.models.gguf_cache import one_parse  # noqa: E402


def _tiny_gguf(path):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_tensor("t", np.arange(8, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_one_reader_per_file_within_the_block_and_the_class_restored(tmp_path):
    a, b = _tiny_gguf(tmp_path / "a.gguf"), _tiny_gguf(tmp_path / "b.gguf")
    original = gguf.GGUFReader
    with one_parse() as readers:
        from gguf import GGUFReader  # as transformers imports it, inside each load

        first = GGUFReader(a)
        assert GGUFReader(str(a)) is first  # the same file: the same reader
        other = GGUFReader(b)
        assert other is not first and len(readers) == 2
        assert [t.name for t in first.tensors] == ["t"] and first.tensors[0].data.tolist() == list(range(8))
    assert gguf.GGUFReader is original
    assert gguf.GGUFReader(a) is not first  # outside the block: a new parse


def test_the_class_is_restored_when_the_load_fails(tmp_path):
    original = gguf.GGUFReader
    with pytest.raises(RuntimeError), one_parse():
        raise RuntimeError("load failed")
    assert gguf.GGUFReader is original
