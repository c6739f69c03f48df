"""The public surface: pinned names, the exception tree, and import hygiene."""

from __future__ import annotations

import subprocess
import sys

import scrubjay
from scrubjay import errors

EXPECTED = {
    "ScrubJayMemory", "MemoryRecord", "Hit", "IntegrationReport", "Deltas", "Perishability",
    "Embedder", "ScrubJayConfig", "FusionConfig", "ClassifierConfig", "KeywordRule",
    "DecayConfig", "WeightConfig", "GraphConfig", "RCIConfig", "BufferConfig",
    "ConsolidationConfig", "RetentionPolicy", "LLMConfig", "SearchConfig", "SupersessionConfig", "ScrubJayError",
    "ConfigError", "EmbedderMismatchError", "InvalidInputError", "InvalidNamespaceError",
    "MemoryNotFoundError", "EmbeddingError", "FilterError", "LLMError", "StoreError",
    "StoreLockedError", "ForkedStoreError", "TimeWindowError", "NamespaceNotFoundError",
    "__version__",
}


def test_all_is_pinned() -> None:
    assert set(scrubjay.__all__) == EXPECTED
    for name in scrubjay.__all__:
        assert hasattr(scrubjay, name)


def test_exception_tree() -> None:
    assert issubclass(errors.ScrubJayError, Exception)
    assert not issubclass(errors.ScrubJayError, (ValueError, RuntimeError))
    pairs = {errors.ConfigError: ValueError, errors.InvalidInputError: (ValueError, TypeError),
             errors.MemoryNotFoundError: KeyError, errors.StoreError: RuntimeError,
             errors.NamespaceNotFoundError: LookupError,
             errors.EmbeddingError: RuntimeError, errors.LLMError: RuntimeError,
             errors.StoreLockedError: errors.StoreError,
             errors.ForkedStoreError: errors.StoreLockedError,
             errors.EmbedderMismatchError: errors.ConfigError,
             errors.InvalidNamespaceError: errors.InvalidInputError,
             errors.FilterError: ValueError,
             errors.TimeWindowError: ValueError}
    for exc, base in pairs.items():
        assert issubclass(exc, errors.ScrubJayError) and issubclass(exc, base)


def test_import_loads_no_framework_and_does_nothing() -> None:
    code = ("import sys, logging\n"
            "before = set(logging.root.manager.loggerDict)\n"
            "import scrubjay, scrubjay.memory, scrubjay.cli, scrubjay.testing\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('langchain_core', 'langchain', 'langgraph', 'llama_index', 'langchain_ollama', "
            "'wordllama', 'torch')]\n"
            "print(repr(bad))\n"
            "print(logging.root.handlers)\n")
    out = subprocess.run([sys.executable, "-W", "error::Warning", "-c", code],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "[]"]


def test_config_validation_messages() -> None:
    import pytest
    from scrubjay import ConfigError, DecayConfig, RCIConfig, ScrubJayConfig

    with pytest.raises(ConfigError, match="'stale_ratio' parameter of DecayConfig"):
        DecayConfig(stale_ratio=1.5)
    with pytest.raises(ConfigError, match="1 \\+ eta_tau"):
        RCIConfig(dtau_min=-5.0)
    with pytest.raises(ConfigError, match="'decay' parameter of ScrubJayConfig"):
        ScrubJayConfig(decay="fast")  # type: ignore[arg-type]


def test_the_wheel_carries_the_license(tmp_path) -> None:
    """pyproject declares MIT: the built distribution must ship the license text with it."""
    import shutil
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    src = tmp_path / "src"  # a copy: an in-tree build would leave build/ in the checkout
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "*.pyc")
    for name in ("core", "langchain_scrubjay", "llamaindex_scrubjay"):
        shutil.copytree(root / name, src / name, ignore=junk)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(root / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "dist").glob("scrubjay_mem-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        assert zf.read(license_file).decode().startswith("MIT License")
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        assert "License-Expression: MIT" in zf.read(metadata).decode().splitlines()
        assert "scrubjay/data/" in "".join(names)  # the shipped estimator data came along
