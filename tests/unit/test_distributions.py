"""The wheel and the sdist carry the Apache-2.0 license text that pyproject.toml declares."""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_wheel_and_the_sdist_carry_the_license_and_declare_it(tmp_path: Path) -> None:
    # Without isolation: hatchling comes from the dev extra, so nothing is downloaded.
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    license_text = (ROOT / "LICENSE").read_bytes()
    assert license_text.lstrip().startswith(b"Apache License\n")
    assert b"Version 2.0, January 2004" in license_text
    (wheel,) = tmp_path.glob("dynalease-*.whl")
    (sdist,) = tmp_path.glob("dynalease-*.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        (info,) = {name.split("/")[0] for name in archive.namelist() if ".dist-info/" in name}
        assert archive.read(f"{info}/licenses/LICENSE") == license_text
        metadata = email.message_from_bytes(archive.read(f"{info}/METADATA"))
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE"]
    with tarfile.open(sdist) as archive:
        root = archive.getnames()[0].split("/")[0]
        member = archive.extractfile(f"{root}/LICENSE")
        assert member is not None and member.read() == license_text
